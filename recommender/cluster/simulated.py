"""The simulated cluster: a deterministic fleet, so vpaweb runs with no Kubernetes.

A fleet is a pure function of ``(seed, workload_count)``: namespaces, workloads of every
kind (Deployment, StatefulSet, DaemonSet, CronJob), multi-container pods with sidecars
and init containers, each container with a usage pattern (steady, diurnal, bursty,
leaking, OOM-killed, idle) and requests set the way people set them (mostly far too
high, some too low, some missing). The fleet "advances with wall-clock time": long-lived
pods keep stable names, CronJob runs start on their schedule and their pods come and go,
OOM kills happen when a leaking container reaches its memory limit. Usage itself lives
in ``recommender.sources.simulated``; both read the same ``Fleet``."""
# Like every adapter, it only reads. Pods it creates (CronJob runs) go through the
# admission webhook's service when one is given (``simulated_admission.py``); writes
# (resizes, evictions) go through ``simulated_writer.SimulatedWriter`` and come back
# here as ``overrides``.

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from recommender.cluster.base import (
    ClusterSnapshot,
    ContainerSpec,
    ContainerState,
    OomKill,
    PodInfo,
    WorkloadInfo,
)
from recommender.cluster.label_selector import matches, parse
from recommender.cluster.nodes import NodeListing
from recommender.cluster.simulated_admission import ADMITTED, Admit
from recommender.cluster.simulated_hpas import HpaOverride, hpa_object, summaries
from recommender.cluster.simulated_labels import namespace_labels, workload_labels
from recommender.engine.resources import Resources

logger = logging.getLogger(__name__)

MIB = 2**20
GIB = 2**30
DAY_S = 86400.0

NAMESPACES = (
    "payments",
    "checkout",
    "search",
    "catalog",
    "platform",
    "data",
    "monitoring",
    "web",
)
PREFIXES = (
    "orders",
    "billing",
    "cart",
    "search",
    "catalog",
    "users",
    "auth",
    "images",
    "reports",
    "pricing",
    "inventory",
    "shipping",
    "ledger",
    "notify",
    "ranking",
    "profile",
    "session",
    "gateway",
    "audit",
    "feeds",
    "media",
    "geo",
    "quotes",
    "reviews",
)
SUFFIXES = {
    "Deployment": ("api", "web", "worker", "frontend", "grpc", "consumer", "service"),
    "StatefulSet": ("db", "cache", "queue", "store", "index"),
    "DaemonSet": ("agent", "node-exporter", "log-collector", "proxy"),
    "CronJob": ("cleanup", "report", "sync", "backup", "rollup"),
}
# Share of each kind in a fleet (the rest are Deployments), as in a typical platform
# cluster.
KIND_SHARES = (("StatefulSet", 0.15), ("DaemonSet", 0.07), ("CronJob", 0.12))
# The nodes DaemonSets run on: one pod per node.
NODE_COUNT = 4
# The version the simulated cluster reports: it takes every resize at once, memory-limit
# decreases included, as a 1.35+ API server and kubelet do.
SIMULATED_VERSION = "v1.36.0-simulated"
# CronJob schedules in hours; shorter periods make more short-lived pods per day.
CRON_PERIODS_H = (2, 4, 6, 12, 24)
# Kubernetes' alphabet for generated name suffixes (no vowels, no look-alikes).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
PATTERNS = ("steady", "diurnal", "bursty", "leaking", "oom", "idle")
# OOM kills of the last this-many seconds are reported by discovery, as pod statuses and
# events would show them; the refresh stores each once (OomKill's unique constraint).
OOM_LOOKBACK_S = 9 * DAY_S
# The annotations of a pod the writer did not touch: one empty dict shared by every
# such pod (read only; ``_overridden`` makes a new one).
NO_ANNOTATIONS: dict[str, str] = {}


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of ``parts``, the same in every process (unlike ``hash()``)."""
    digest = hashlib.blake2b(
        "\x1f".join(map(str, parts)).encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little")


def _pod_uid(namespace: str, pod: str) -> str:
    """A pod's stable uid (not memoised: a long-lived pod's is kept in its workload's
    ``long_lived_pod_infos``, and a CronJob run lives minutes)."""
    return "{:032x}".format(stable_hash("pod", namespace, pod))


def name_suffix(length: int, *parts: object) -> str:
    """A Kubernetes-looking random suffix derived from ``parts``."""
    value = stable_hash(*parts)
    chars = []
    for _ in range(length):
        value, index = divmod(value, len(NAME_ALPHABET))
        chars.append(NAME_ALPHABET[index])
    return "".join(chars)


@dataclass(frozen=True)
class ContainerUsage:
    """How a simulated container uses CPU and memory (each replica ± 10 %)."""

    pattern: str  # one of PATTERNS
    cpu_cores: float  # typical usage
    cpu_diurnal_amplitude: float  # 0..1, relative swing over a day
    cpu_noise: float  # relative standard deviation per minute
    cpu_burst_probability: float  # share of 5-minute blocks with a burst
    cpu_burst_factor: float  # usage multiplier during a burst
    memory_bytes: float  # working set after start
    memory_diurnal_amplitude: float
    memory_leak_bytes_per_s: float  # growth until the cycle restarts the container
    memory_cycle_s: (
        float  # leak cycle: a restart (leaking) or an OOM kill (oom); 0 = none
    )
    phase_s: float  # where in its day and cycle the container is


@dataclass(frozen=True)
class SimContainer:
    """A container of a simulated pod template."""

    name: str
    kind: str  # Container.Kind values: "regular", "init", "sidecar"
    requests: Resources
    limits: Resources
    usage: ContainerUsage | None  # None for init containers: they have finished

    def spec(self) -> ContainerSpec:
        """The adapter-facing view."""
        return ContainerSpec(self.name, self.kind, self.requests, self.limits)


@dataclass(frozen=True)
class SimWorkload:
    """A simulated top-level controller."""

    kind: str
    namespace: str
    name: str
    replicas: int
    containers: tuple[SimContainer, ...]
    template_hash: str = ""
    cron_period_s: float = 0.0  # CronJob only
    cron_offset_s: float = 0.0
    run_duration_s: float = 0.0

    @cached_property
    def container_specs(self) -> tuple[ContainerSpec, ...]:
        """The adapter-facing view of the pod template's containers (kept: discovery
        names them for every workload and pod every cycle)."""
        return tuple(container.spec() for container in self.containers)

    @cached_property
    def long_lived_pod_infos(self) -> tuple[PodInfo, ...]:
        """The adapter-facing view of the long-lived pods, as discovery lists them
        (kept: they are the same every cycle)."""
        labels = {"app": self.name}
        return tuple(
            PodInfo(
                namespace=self.namespace,
                name=pod,
                phase="Running",
                containers=self.container_specs,
                start_time=None,
                labels=labels,
                uid=_pod_uid(self.namespace, pod),
                annotations=NO_ANNOTATIONS,
                container_states=_running(self.container_specs, pod),
            )
            for pod in self.long_lived_pods()
        )

    @cached_property
    def change_marker(self) -> str:
        """What its ``WorkloadInfo.version`` starts from: a digest of everything
        discovery reads of it and of its long-lived pods (its template, replicas,
        labels, pod names), so a fleet drawn otherwise (another seed, size or code)
        moves it. Computed once a process."""
        return "{:016x}".format(
            stable_hash(
                self.kind,
                self.namespace,
                self.name,
                self.replicas,
                self.container_specs,
                workload_labels(self.kind, self.namespace, self.name),
                self.long_lived_pods(),
            )
        )

    @cached_property
    def uid(self) -> str:
        """A stable uid for the workload."""
        return f"{stable_hash('uid', self.namespace, self.kind, self.name):032x}"

    def long_lived_pods(self) -> tuple[str, ...]:
        """Names of the pods that always exist (every kind but CronJob)."""
        return self._long_lived_pods

    @cached_property
    def _long_lived_pods(self) -> tuple[str, ...]:
        # Computed once per workload: discovery, the OOM kills and the usage source
        # ask for them every cycle (a frozen dataclass keeps its cache in __dict__).
        if self.kind == "StatefulSet":
            return tuple(f"{self.name}-{i}" for i in range(self.replicas))
        if self.kind == "DaemonSet":
            return tuple(
                f"{self.name}-{name_suffix(5, self.name, 'node', i)}"
                for i in range(self.replicas)
            )
        if self.kind == "CronJob":
            return ()
        return tuple(
            f"{self.name}-{self.template_hash}-{name_suffix(5, self.name, i)}"
            for i in range(self.replicas)
        )

    @property
    def schedule(self) -> str:
        """A CronJob's cron expression of its runs (periods divide a day)."""
        if self.kind != "CronJob":
            return ""
        minute, hours = int(self.cron_offset_s // 60), int(self.cron_period_s // 3600)
        return f"{minute} {'0' if hours >= 24 else f'*/{hours}'} * * *"

    def runs_between(
        self, start_s: float, end_s: float
    ) -> list[tuple[str, float, float]]:
        """CronJob runs alive in ``(start_s, end_s]``: (pod name, start, end)."""
        if self.kind != "CronJob":
            return []
        period, offset = self.cron_period_s, self.cron_offset_s
        first = math.floor((start_s - self.run_duration_s - offset) / period)
        last = math.floor((end_s - offset) / period)
        runs = []
        for k in range(max(first, 0), last + 1):
            run_start = offset + k * period
            run_end = run_start + self.run_duration_s
            if run_start >= end_s or run_end <= start_s:
                continue
            # Kubernetes names a CronJob's Job after its scheduled time in minutes.
            job = f"{self.name}-{int(run_start // 60)}"
            runs.append((f"{job}-{name_suffix(5, job)}", run_start, run_end))
        return runs


@dataclass(frozen=True)
class Fleet:
    """A whole simulated cluster: workloads and the rules their pods follow."""

    seed: int
    workloads: tuple[SimWorkload, ...]

    @cached_property
    def hpas(self) -> tuple[dict[str, Any], ...]:
        """The HorizontalPodAutoscalers of the fleet (``simulated_hpas``), computed
        once (every discovery lists them)."""
        found = (
            hpa_object(self.seed, w, stable_hash=stable_hash) for w in self.workloads
        )
        return tuple(obj for obj in found if obj is not None)

    @cached_property
    def hpa_summaries(self) -> tuple[dict[str, Any], ...]:
        """``hpa_of`` of each HPA as the fleet defines it (computed once; a writer's
        patch is summarised again by discovery)."""
        return tuple(summaries(self.hpas, {}))

    def pods_at(self, workload: SimWorkload, at_s: float) -> list[tuple[str, float]]:
        """Pods of ``workload`` alive at ``at_s``: (name, start time)."""
        if workload.kind == "CronJob":
            return [
                (name, start)
                for name, start, _ in workload.runs_between(at_s - 1, at_s)
            ]
        return [(name, 0.0) for name in workload.long_lived_pods()]

    def oom_kills_between(self, start_s: float, end_s: float) -> list[OomKill]:
        """OOM kills with times in ``(start_s, end_s]``, oldest first."""
        kills = []
        for workload in self.workloads:
            for container in workload.containers:
                usage = container.usage
                if usage is None or usage.pattern != "oom":
                    continue
                for replica, pod in enumerate(workload.long_lived_pods()):
                    cycle = usage.memory_cycle_s
                    phase = replica_phase(usage, replica)
                    first = math.floor((start_s - phase) / cycle) + 1
                    last = math.floor((end_s - phase) / cycle)
                    for k in range(first, last + 1):
                        kills.append(
                            OomKill(
                                namespace=workload.namespace,
                                pod=pod,
                                container=container.name,
                                occurred_at=datetime.fromtimestamp(
                                    round(phase + k * cycle), tz=UTC
                                ),
                                memory_request_bytes=container.requests.memory_bytes
                                or 0,
                            )
                        )
        kills.sort(key=lambda kill: kill.occurred_at)
        return kills


def replica_phase(usage: ContainerUsage, replica: int) -> float:
    """Replicas of a workload are out of step by a fraction of their cycle."""
    cycle = usage.memory_cycle_s or DAY_S
    return usage.phase_s + (replica * 0.37 * cycle) % cycle


def nice_cpu_millicores(value: float) -> int:
    """Round CPU up as people write requests: 50m steps, then 250m, then cores."""
    if value <= 250:
        step = 50
    elif value <= 2000:
        step = 250
    else:
        step = 1000
    return int(max(step, math.ceil(value / step) * step))


def nice_memory_bytes(value: float) -> int:
    """Round a memory amount up to 64Mi steps, then 256Mi, then whole Gi."""
    if value <= 512 * MIB:
        step = 64 * MIB
    elif value <= 2 * GIB:
        step = 256 * MIB
    else:
        step = GIB
    return int(max(step, math.ceil(value / step) * step))


def _usage(rng: np.random.Generator, pattern: str, scale: float) -> ContainerUsage:
    """Draw a usage pattern; ``scale`` sizes it (1 = a main container)."""
    cpu = float(rng.lognormal(math.log(0.15), 0.9)) * scale
    memory = float(rng.lognormal(math.log(300 * MIB), 0.7)) * scale
    diurnal_cpu = diurnal_mem = 0.0
    noise, burst_p, burst_f = 0.08, 0.0, 1.0
    leak, cycle = 0.0, 0.0
    if pattern == "diurnal":
        diurnal_cpu, diurnal_mem, noise = float(rng.uniform(0.4, 0.8)), 0.1, 0.1
    elif pattern == "bursty":
        burst_p, burst_f, noise = (
            float(rng.uniform(0.03, 0.12)),
            float(rng.uniform(3, 8)),
            0.2,
        )
    elif pattern == "leaking":
        # A slow leak that a weekly deploy or restart resets, never reaching the limit.
        cycle = float(rng.uniform(3, 7)) * DAY_S
        leak = memory * float(rng.uniform(0.5, 1.5)) / cycle
    elif pattern == "oom":
        # Grows to its memory limit in under a day or two, then the kernel kills it.
        cycle = float(rng.uniform(8, 40)) * 3600
        leak = memory * float(rng.uniform(0.6, 1.2)) / cycle
    elif pattern == "idle":
        cpu, memory, noise = (
            float(rng.uniform(0.001, 0.004)),
            float(rng.uniform(20, 60)) * MIB,
            0.05,
        )
    return ContainerUsage(
        pattern=pattern,
        cpu_cores=cpu,
        cpu_diurnal_amplitude=diurnal_cpu,
        cpu_noise=noise,
        cpu_burst_probability=burst_p,
        cpu_burst_factor=burst_f,
        memory_bytes=memory,
        memory_diurnal_amplitude=diurnal_mem,
        memory_leak_bytes_per_s=leak,
        memory_cycle_s=cycle,
        phase_s=float(rng.uniform(0, DAY_S)),
    )


def _requests(
    rng: np.random.Generator, usage: ContainerUsage
) -> tuple[Resources, Resources]:
    """Requests and limits as people set them: mostly far too high, some missing."""
    cpu_peak = usage.cpu_cores * (1 + usage.cpu_diurnal_amplitude) * 1000
    memory_peak = usage.memory_bytes * (1 + usage.memory_diurnal_amplitude) + (
        usage.memory_leak_bytes_per_s * usage.memory_cycle_s
    )
    if usage.pattern == "oom":
        # Guaranteed QoS with a limit the leak reaches: request = limit.
        memory_limit = nice_memory_bytes(memory_peak)
        cpu = nice_cpu_millicores(cpu_peak * float(rng.uniform(1.5, 4)))
        return Resources(cpu, memory_limit), Resources(cpu, memory_limit)
    draw = rng.uniform()
    if draw < 0.12:
        return Resources(), Resources()
    factor = rng.uniform(0.4, 0.85) if draw < 0.3 else rng.uniform(2.5, 8)
    cpu_request = nice_cpu_millicores(cpu_peak * factor)
    memory_request = nice_memory_bytes(memory_peak * factor)
    requests = Resources(cpu_request, memory_request)
    if rng.uniform() < 0.5:
        limits = Resources(
            cpu_request * 2,
            # Leave head-room above real use so only the "oom" pattern is ever killed.
            max(memory_request * 2, nice_memory_bytes(memory_peak * 2)),
        )
    else:
        limits = Resources()
    return requests, limits


def _containers(
    rng: np.random.Generator, kind: str, suffix: str
) -> tuple[SimContainer, ...]:
    """The main container, sidecars and sometimes an init container."""
    if kind == "CronJob":
        pattern = str(rng.choice(["steady", "bursty"]))
    elif kind == "DaemonSet":
        pattern = str(rng.choice(["steady", "diurnal", "idle"], p=[0.5, 0.3, 0.2]))
    else:
        pattern = str(rng.choice(PATTERNS, p=[0.25, 0.25, 0.15, 0.12, 0.08, 0.15]))
    main_usage = _usage(rng, pattern, 1.0)
    requests, limits = _requests(rng, main_usage)
    if pattern == "oom":
        # Leak exactly up to the (rounded) limit by the end of each cycle: then the OOM
        # kill.
        limit_bytes = limits.memory_bytes
        if limit_bytes is None:
            raise AssertionError("_requests gives every oom container a memory limit")
        leak = (limit_bytes - main_usage.memory_bytes) / main_usage.memory_cycle_s
        main_usage = replace(main_usage, memory_leak_bytes_per_s=leak)
    containers = [SimContainer(suffix, "regular", requests, limits, main_usage)]
    if kind in ("Deployment", "StatefulSet") and rng.uniform() < 0.35:
        usage = _usage(rng, "steady", 0.2)
        containers.append(
            SimContainer("istio-proxy", "regular", *_requests(rng, usage), usage)
        )
    if kind != "CronJob" and rng.uniform() < 0.2:
        usage = _usage(rng, str(rng.choice(["steady", "bursty"])), 0.15)
        # A native sidecar (restartPolicy: Always init container) that ships logs.
        containers.append(
            SimContainer("log-shipper", "sidecar", *_requests(rng, usage), usage)
        )
    if kind == "StatefulSet" and rng.uniform() < 0.4:
        usage = _usage(rng, "steady", 0.1)
        containers.append(
            SimContainer("metrics-exporter", "regular", *_requests(rng, usage), usage)
        )
    if kind in ("Deployment", "StatefulSet") and rng.uniform() < 0.25:
        containers.insert(
            0,
            SimContainer(
                str(rng.choice(["wait-for-db", "init-config", "migrate"])),
                "init",
                Resources(50, 64 * MIB),
                Resources(),
                None,
            ),
        )
    return tuple(containers)


@lru_cache(maxsize=8)
def build_fleet(seed: int, workload_count: int) -> Fleet:
    """The fleet of ``workload_count`` workloads drawn from ``seed`` (immutable)."""
    if workload_count < 1:
        raise ValueError(f"workload_count must be at least 1, not {workload_count}")
    rng = np.random.default_rng(seed)
    kinds = []
    for kind, share in KIND_SHARES:
        kinds += [kind] * max(1, round(workload_count * share))
    kinds = (kinds + ["Deployment"] * workload_count)[:workload_count]
    if workload_count >= 4:
        kinds[-1] = "Deployment"  # keep at least one of each kind, Deployments included
    rng.shuffle(kinds)
    used: set[tuple[str, str]] = set()
    workloads = []
    for index, kind in enumerate(kinds):
        namespace = str(rng.choice(NAMESPACES))
        suffix = str(rng.choice(SUFFIXES[kind]))
        name = f"{rng.choice(PREFIXES)}-{suffix}"
        if (namespace, name) in used:
            name = f"{name}-{index}"
        used.add((namespace, name))
        containers = _containers(rng, kind, suffix)
        if kind == "DaemonSet":
            replicas = NODE_COUNT
        elif kind == "CronJob":
            replicas = 1
        elif kind == "StatefulSet":
            replicas = int(rng.choice([1, 2, 3], p=[0.3, 0.2, 0.5]))
        else:
            replicas = int(rng.choice([1, 2, 3, 4, 6], p=[0.15, 0.35, 0.3, 0.1, 0.1]))
        cron_period = (
            float(rng.choice(CRON_PERIODS_H)) * 3600 if kind == "CronJob" else 0.0
        )
        workloads.append(
            SimWorkload(
                kind=kind,
                namespace=namespace,
                name=name,
                replicas=replicas,
                containers=containers,
                template_hash=name_suffix(10, seed, namespace, name, "template"),
                cron_period_s=cron_period,
                cron_offset_s=float(rng.integers(0, 60)) * 60 if cron_period else 0.0,
                run_duration_s=float(rng.integers(5, 40)) * 60 if cron_period else 0.0,
            )
        )
    return Fleet(seed=seed, workloads=tuple(workloads))


@dataclass(frozen=True)
class PodOverride:
    """What the simulated writer changed in one pod (``simulated_writer.py``)."""

    # container name -> (requests, limits); absent containers keep the template's.
    containers: Mapping[str, tuple[Resources, Resources]]
    uid_suffix: int = 0  # > 0: evicted and recreated that many times
    restarted_at: datetime | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)


def _running(specs: tuple[ContainerSpec, ...], pod: str) -> tuple[ContainerState, ...]:
    """Every simulated container runs, ready, never restarted."""
    return tuple(
        ContainerState(
            name=c.name,
            state="running",
            ready=True,
            container_id=f"sim://{pod}/{c.name}",
        )
        for c in specs
        if c.kind != "init"
    )


def _overridden(pod: PodInfo, override: PodOverride | None) -> PodInfo:
    if override is None:
        return pod
    containers = tuple(
        replace(
            c,
            requests=override.containers[c.name][0],
            limits=override.containers[c.name][1],
        )
        if c.name in override.containers
        else c
        for c in pod.containers
    )
    uid = pod.uid
    if override.uid_suffix:
        uid = f"{pod.uid[:-4]}{override.uid_suffix:04x}"
    start = pod.start_time
    if override.restarted_at is not None and (
        start is None or override.restarted_at > start
    ):
        start = override.restarted_at
    return replace(
        pod,
        containers=containers,
        uid=uid,
        start_time=start,
        annotations={**pod.annotations, **override.annotations},
    )


class SimulatedCluster:
    """ClusterAdapter over a simulated ``Fleet``, observed at ``now``; with a
    ``namespace``, only that namespace is seen (a shard), as a real cluster's
    namespaced lists do. ``overrides`` are the writer's changes, by (namespace, pod).
    With a ``namespace_selector`` (``Cluster.namespace_selector``) only namespaces
    whose labels (``namespace_labels``) it selects are seen."""

    def __init__(
        self,
        *,
        name: str,
        fleet: Fleet,
        now: datetime,
        namespace: str | None = None,
        admit: Admit | None = None,
        admit_window_s: float = 0.0,
        overrides: Mapping[tuple[str, str], PodOverride] | None = None,
        namespace_selector: str = "",
        hpa_overrides: Mapping[tuple[str, str], HpaOverride] | None = None,
        annotations: Mapping[tuple[str, str, str], Mapping[str, str]] | None = None,
    ) -> None:
        self.name = name
        self.selector = parse(namespace_selector)
        self.fleet = fleet
        self.now = now
        self.namespace = namespace or None
        # Pods started in the last ``admit_window_s`` go through ``admit`` (the
        # admission webhook's service) once: see simulated_admission.py.
        self.admit = admit
        self.admit_window_s = admit_window_s
        self.overrides = overrides or {}
        # HPAs the writer patched (coordinated HPA mode), by (namespace, name).
        self.hpa_overrides = hpa_overrides or {}
        # Workloads' annotations an operator set, by (namespace, kind, name).
        self.annotations = annotations or {}

    def _reads(self, namespace: str) -> bool:
        """Whether this adapter sees ``namespace`` (its shard, its opt-in)."""
        if self.namespace is not None and namespace != self.namespace:
            return False
        return matches(self.selector, namespace_labels(namespace))

    def _pod_containers(
        self, sim: SimWorkload, pod: str, start_s: float, now_s: float
    ) -> tuple[ContainerSpec, ...]:
        """The containers a pod runs with as admitted, if it went through admission."""
        template = sim.container_specs
        if self.admit is None or not start_s:
            return template
        key = (self.name, sim.namespace, pod)
        admitted = ADMITTED.get(key)
        if admitted is not None:
            return admitted
        if now_s - start_s > self.admit_window_s:
            return template  # created before this process watched: not ours to say
        return ADMITTED.create(
            cluster=self.name,
            namespace=sim.namespace,
            name=pod,
            cronjob=sim.name,
            template=template,
            admit=self.admit,
        )

    def list_nodes(self, snapshot: ClusterSnapshot) -> NodeListing:
        """The fixed node layout of the fleet and the snapshot's pods on it."""
        # Imported here: the layout module builds on this one's fleet.
        from recommender.cluster.simulated_nodes import simulated_listing

        return simulated_listing(self.fleet, snapshot)

    def discover(self) -> ClusterSnapshot:
        """Workloads with their live pods at ``now``, and recent OOM kills."""
        now_s = self.now.timestamp()
        hpas = [
            summaries((obj,), self.hpa_overrides)[0]
            if (summary["namespace"], summary["name"]) in self.hpa_overrides
            else summary
            for obj, summary in zip(
                self.fleet.hpas, self.fleet.hpa_summaries, strict=True
            )
            if self._reads(summary["namespace"])
        ]
        scaled = {
            (hpa["namespace"], hpa["target_name"]): tuple(hpa["scaled_resources"])
            for hpa in hpas
        }
        workloads = []
        for sim in self.fleet.workloads:
            if not self._reads(sim.namespace):
                continue
            specs = sim.container_specs
            labels = {"app": sim.name}
            pods = (
                sim.long_lived_pod_infos
                if sim.kind != "CronJob"
                else tuple(
                    PodInfo(
                        namespace=sim.namespace,
                        name=pod,
                        phase="Running",
                        containers=self._pod_containers(sim, pod, start_s, now_s),
                        start_time=datetime.fromtimestamp(start_s, tz=UTC)
                        if start_s
                        else None,
                        labels=labels,
                        uid=_pod_uid(sim.namespace, pod),
                        annotations=NO_ANNOTATIONS,
                        container_states=_running(specs, pod),
                    )
                    for pod, start_s in self.fleet.pods_at(sim, now_s)
                )
            )
            # The change marker (WorkloadInfo.version): the writer's changes to the
            # pods and an operator's annotations are part of it. A CronJob has none:
            # its runs come and go (admitted with what the webhook gave them) from
            # one minute to the next, so it is compared every pass.
            version = "" if sim.kind == "CronJob" else sim.change_marker
            annotations = self.annotations.get((sim.namespace, sim.kind, sim.name))
            if annotations and version:
                version += f"/{sorted(annotations.items())!r}"
            if self.overrides:
                overrides = [self.overrides.get((sim.namespace, p.name)) for p in pods]
                if version and any(overrides):
                    version += f"/{overrides!r}"
                pods = tuple(
                    _overridden(pod, override)
                    for pod, override in zip(pods, overrides, strict=True)
                )
            workloads.append(
                WorkloadInfo(
                    kind=sim.kind,
                    namespace=sim.namespace,
                    name=sim.name,
                    containers=specs,
                    uid=sim.uid,
                    selector={"matchLabels": labels},
                    # A DaemonSet's: status.desiredNumberScheduled, one per node.
                    replicas=None if sim.kind == "CronJob" else sim.replicas,
                    schedule=sim.schedule,
                    labels=workload_labels(sim.kind, sim.namespace, sim.name),
                    annotations=dict(annotations or {}),
                    pods=pods,
                    hpa_scaled_resources=scaled.get((sim.namespace, sim.name), ())
                    if sim.kind == "Deployment"
                    else (),
                    version=version,
                )
            )
        kills = [
            kill
            for kill in self.fleet.oom_kills_between(now_s - OOM_LOOKBACK_S, now_s)
            if self._reads(kill.namespace)
        ]
        return ClusterSnapshot(
            workloads=tuple(workloads),
            oom_kills=tuple(kills),
            horizontal_pod_autoscalers=tuple(hpas),
            server_version=SIMULATED_VERSION,
            namespace_labels={
                ns: namespace_labels(ns)
                for ns in sorted({sim.namespace for sim in self.fleet.workloads})
                if self._reads(ns)
            },
        )
