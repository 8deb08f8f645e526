"""The workload page's CPU startup boost panel: the policy's boost, the pods still
boosted and until when (as the updater last saw them), and how many boosted pods the
updater has shrunk back. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from recommender.engine.quantity import format_cpu
from recommender.engine.startup_boost import parse_boost
from recommender.models import AuditEvent, Policy, Workload


@dataclass(frozen=True)
class BoostedPod:
    """One pod still boosted; ``until`` None while it is not Ready yet."""

    pod: str
    until: datetime | None


@dataclass(frozen=True)
class StartupBoostPanel:
    """What the page says of the workload's startup boost."""

    setting: str  # "CPU ×2 until Ready + 300 s"
    pods: tuple[BoostedPod, ...]
    unboosts: int  # boosted pods shrunk back in place, ever


def startup_boost_panel(
    *, workload: Workload, policy: Policy | None
) -> StartupBoostPanel | None:
    """The panel, or None when the policy has no boost and no pod is boosted."""
    try:
        spec = parse_boost(getattr(policy, "startup_boost", None))
    except ValueError:
        spec = None
    pods = tuple(
        BoostedPod(
            pod=str(entry.get("pod", "")),
            until=datetime.fromisoformat(entry["until"])
            if entry.get("until")
            else None,
        )
        for entry in workload.startup_boosted_pods or ()
        if isinstance(entry, dict)
    )
    if spec is None and not pods:
        return None
    if spec is None:
        setting = "off (pods admitted boosted before are still shrunk back)"
    elif spec.factor is not None:
        setting = f"CPU ×{spec.factor:g} until Ready + {spec.duration_s} s"
    else:
        setting = (
            f"CPU +{format_cpu(spec.quantity_millicores or 0)} until Ready + "
            f"{spec.duration_s} s"
        )
    unboosts = AuditEvent.objects.filter(
        workload=workload, action=AuditEvent.Action.POD_UNBOOST
    ).count()
    return StartupBoostPanel(setting=setting, pods=pods, unboosts=unboosts)
