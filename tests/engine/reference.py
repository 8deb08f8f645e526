"""A plain, one-operation-at-a-time port of upstream VPA's Go code, used only by tests.

Ports histogram_options.go, histogram.go, decaying_histogram.go, container.go,
aggregate_container_state.go and estimator.go/recommender.go as literally as Python
allows (times in Unix seconds; an unset time is None). It shares only the Go math
primitives with the engine. The vectorised engine must produce bit-identical state and
equal recommendations.
"""

from __future__ import annotations

import math

from recommender.engine.gomath import go_exp2, go_log, go_pow, go_pow_int, go_round

GO_ZERO_TO_UNIX_S = 62135596800
MAX_AMOUNT = 10**14


class Options:
    def __init__(
        self, kind: str, max_value: float, size: float, ratio: float, eps: float
    ):
        self.kind, self.size, self.ratio, self.eps = kind, size, ratio, eps
        if kind == "linear":
            self.n = math.ceil(max_value / size) + 1
        else:
            self.r1 = ratio - 1
            self.n = (
                math.ceil(go_log(max_value * self.r1 / size + 1) / go_log(ratio)) + 1
            )

    def find_bucket(self, v: float) -> int:
        if self.kind == "linear":
            q = v / self.size
            b = int(q) if q == q and abs(q) < 2**62 else (self.n - 1 if q > 0 else 0)
            return 0 if b < 0 else min(b, self.n - 1)
        if v < self.size:
            return 0
        q = go_log(v * self.r1 / self.size + 1) / go_log(self.ratio)
        return self.n - 1 if q >= self.n else int(q)

    def bucket_start(self, b: int) -> float:
        if not 0 <= b < self.n:
            raise IndexError(b)
        if self.kind == "linear":
            return float(b) * self.size
        return 0.0 if b == 0 else self.size * (go_pow_int(self.ratio, b) - 1) / self.r1


class Histogram:
    def __init__(self, options: Options):
        self.o = options
        self.w = [0.0] * options.n
        self.total = 0.0
        self.min = options.n - 1
        self.max = 0

    def add(self, v: float, weight: float) -> None:
        assert weight >= 0
        b = self.o.find_bucket(v)
        self.w[b] += weight
        self.total += weight
        if b < self.min and self.w[b] >= self.o.eps:
            self.min = b
        if b > self.max and self.w[b] >= self.o.eps:
            self.max = b

    def subtract(self, v: float, weight: float) -> None:
        b = self.o.find_bucket(v)
        self.total -= weight
        if self.total < self.o.eps:
            self.total = 0.0
        self.w[b] -= weight
        if self.w[b] < self.o.eps:
            self.w[b] = 0.0
        self.update_min_max()

    def update_min_max(self) -> None:
        while self.w[self.min] < self.o.eps and self.min < self.o.n - 1:
            self.min += 1
        while self.w[self.max] < self.o.eps and self.max > 0:
            self.max -= 1

    def is_empty(self) -> bool:
        return self.w[self.min] < self.o.eps

    def percentile(self, p: float) -> float:
        if self.is_empty():
            return 0.0
        partial = 0.0
        threshold = p * self.total
        b = self.min
        while b < self.max:
            partial += self.w[b]
            if partial >= threshold:
                break
            b += 1
        if b < self.o.n - 1:
            return self.o.bucket_start(b + 1)
        return self.o.bucket_start(b)

    def merge(self, other: Histogram) -> None:
        for b in range(other.min, other.max + 1):
            self.w[b] += other.w[b]
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def scale(self, f: float) -> None:
        for b in range(self.min, self.max + 1):
            self.w[b] *= f
        self.total *= f
        self.update_min_max()


def time_round(t: float, step: float) -> float:
    x = t + GO_ZERO_TO_UNIX_S
    r = math.fmod(x, step)
    return (x - r if r + r < step else x + (step - r)) - GO_ZERO_TO_UNIX_S


class DecayingHistogram(Histogram):
    def __init__(self, options: Options, half_life_s: float):
        super().__init__(options)
        self.hl = half_life_s
        self.ref: float | None = None

    def shift(self, t: float) -> None:
        new = time_round(t, self.hl)
        if self.ref is not None:
            k = go_round((self.ref - new) / self.hl)
            self.scale(math.ldexp(1.0, k))
        self.ref = new

    def factor(self, t: float) -> float:
        if self.ref is None or t > self.ref + self.hl * 100:
            self.shift(t)
        return go_exp2((t - self.ref) / self.hl)

    def add_at(self, v: float, weight: float, t: float) -> None:
        self.add(v, weight * self.factor(t))

    def subtract_at(self, v: float, weight: float, t: float) -> None:
        self.subtract(v, weight * self.factor(t))

    def merge_decaying(self, other: DecayingHistogram) -> None:
        if other.ref is not None and (self.ref is None or self.ref < other.ref):
            self.shift(other.ref)
        elif self.ref is not None and (other.ref is None or other.ref < self.ref):
            other.shift(self.ref)
        self.merge(other)


def cpu_options() -> Options:
    return Options("exponential", 1000.0, 0.01, 1.0 + 0.05, 0.001 * 0.1)


def memory_options() -> Options:
    return Options("exponential", 1e12, 1e7, 1.0 + 0.05, 0.001 * 0.1)


class Aggregate:
    def __init__(self, cpu_hl: float = 86400.0, mem_hl: float = 86400.0):
        self.cpu = DecayingHistogram(cpu_options(), cpu_hl)
        self.mem = DecayingHistogram(memory_options(), mem_hl)
        self.first: float | None = None
        self.last: float | None = None
        self.count = 0

    def add_cpu(self, cores: float, t: float) -> None:
        self.cpu.add_at(cores, 0.1, t)
        if self.last is None or t > self.last:
            self.last = t
        if self.first is None or t < self.first:
            self.first = t
        self.count += 1


class Container:
    def __init__(
        self,
        agg: Aggregate,
        window_s: float = 86400.0,
        oom_ratio: float = 1.2,
        oom_min: float = 104857600,
    ):
        self.agg = agg
        self.window = window_s
        self.oom_ratio, self.oom_min = oom_ratio, oom_min
        self.last_cpu: float | None = None
        self.last_mem: float | None = None
        self.window_end: float | None = None
        self.peak = 0.0
        self.oom_peak = 0.0

    def add_cpu(self, t: float, cores: float) -> bool:
        if not cores >= 0 or (self.last_cpu is not None and not t > self.last_cpu):
            return False
        self.agg.add_cpu(cores, t)
        self.last_cpu = t
        return True

    def add_memory(self, t: float, usage: float, is_oom: bool = False) -> bool:
        if not usage >= 0 or (
            not is_oom and self.last_mem is not None and t < self.last_mem
        ):
            return False
        self.last_mem = t
        if self.window_end is None:
            self.window_end = t
        add_new = False
        if t < self.window_end:
            old = max(self.peak, self.oom_peak)
            if old != 0 and usage > old:
                self.agg.mem.subtract_at(old, 1.0, self.window_end)
                add_new = True
        else:
            shift = (
                math.floor((t - self.window_end) / self.window) * self.window
                + self.window
            )
            self.window_end += shift
            self.peak = self.oom_peak = 0.0
            add_new = True
        if add_new:
            self.agg.mem.add_at(usage, 1.0, self.window_end)
            if is_oom:
                self.oom_peak = usage
            else:
                self.peak = usage
        return True

    def record_oom(self, t: float, request: float) -> bool:
        if self.last_mem is not None and t < self.last_mem - self.window:
            return False
        used = max(request, self.peak)
        needed = max(
            used + math.trunc(self.oom_min), float(amount(used * self.oom_ratio))
        )
        return self.add_memory(t, needed, is_oom=True)


def amount(x: float) -> int:
    if x != x:
        return 0  # NaN: the port's choice for 0 * Inf (upstream is platform-dependent)
    if x < 0:
        return 0
    if x > MAX_AMOUNT:
        return MAX_AMOUNT
    return int(x)


def confidence(agg: Aggregate, interval_s: float) -> float:
    span = 0.0 if agg.first is None else agg.last - agg.first
    minutes = interval_s / 60.0
    return min(span / interval_s, agg.count / minutes)


def recommend(
    agg: Aggregate, n_containers: int = 1, profile: dict | None = None
) -> dict[str, tuple[int, int, int]]:
    """Upstream target/lower/upper per resource, default flags or profile overrides
    (``min_margin_mem``: vpaweb's smallest memory margin in bytes, 0 = upstream)."""
    p = {
        "cpu": (0.9, 0.5, 0.95),
        "memory": (0.9, 0.5, 0.95),
        "margin": 0.15,
        "min_cpu": 25,
        "min_mem": 262144000,
    }
    p.update(profile or {})
    out = {}
    for res, hist, to_amount in (("cpu", agg.cpu, 1000.0), ("memory", agg.mem, 1.0)):
        conf = confidence(agg, 86400.0)
        minimum = (
            amount(float(amount(p["min_cpu"] * 0.001 * 1000.0)) * (1.0 / n_containers))
            if res == "cpu"
            else amount(float(p["min_mem"]) * (1.0 / n_containers))
        )
        vals = []
        for i, pct in enumerate(p[res]):
            base = amount(hist.percentile(pct) * to_amount)
            x = base + amount(base * p["margin"])
            if res == "memory":  # vpaweb's memory_margin_min_bytes (0: upstream)
                x = max(x, base + int(p.get("min_margin_mem", 0)))
            if i == 1:
                mult = go_pow(1.0 + 0.001 / conf, -2.0) if conf else 0.0
                x = amount(x * mult)
            elif i == 2:
                mult = 1.0 + 1.0 / conf if conf else math.inf
                x = amount(x * mult)
            vals.append(max(x, minimum))
        out[res] = tuple(vals)
    return out
