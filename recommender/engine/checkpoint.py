"""Checkpoints of one aggregate row: compact bytes, and upstream's v3 ``status`` dict.

Compact format (little-endian), version 1::

    b"VPWE" u16 version | header: u16 cpu buckets, u16 memory buckets, f64 cpu
    half-life, f64 memory half-life, f64 memory window, f64 first sample, f64 last
    sample, i64 count, f64 creation | 2 x histogram: f64 reference, f64 total, u16 min,
    u16 max, u16 k, k x u16 bucket, k x f64 weight | u32 series count, per series: u16
    key length, key UTF-8, 5 x f64 (CPU watermark, memory watermark, window end, memory
    peak, OOM peak) | u32 CRC-32 of everything before it."""
# Every float is stored bit for bit, so a round trip continues exactly. NaN = unset
# time.

from __future__ import annotations

import datetime as dt
import math
import struct
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from .histogram import HistogramBatch

if TYPE_CHECKING:
    from .aggregation import AggregateSet

MAGIC = b"VPWE"
VERSION = 1
# model/aggregate_container_state.go: SupportedCheckpointVersion.
SUPPORTED_VPA_CHECKPOINT_VERSION = "v3"

_HEADER = struct.Struct("<4sHHHdddddqd")
_HIST = struct.Struct("<ddHHH")
_SERIES = struct.Struct("<ddddd")
_COUNT = struct.Struct("<I")
_KEY_LENGTH = struct.Struct("<H")


def _encode_hist(h: HistogramBatch, row: int) -> bytes:
    w = h.weight[row, :]
    nz = np.nonzero(w)[0]
    head = _HIST.pack(
        float(h.reference_s[row]),
        float(h.total[row]),
        int(h.min_bucket[row]),
        int(h.max_bucket[row]),
        nz.size,
    )
    return head + nz.astype("<u2").tobytes() + w[nz].astype("<f8").tobytes()


def encode_row(aggs: AggregateSet, row: int, series: list[int]) -> bytes:
    """Compact bytes of aggregate ``row`` and its ``series``."""
    p = aggs.profile
    parts = [
        _HEADER.pack(
            MAGIC,
            VERSION,
            aggs.cpu.options.num_buckets,
            aggs.memory.options.num_buckets,
            p.cpu_half_life_s,
            p.memory_half_life_s,
            p.memory_window_s,
            float(aggs.first_sample_s[row]),
            float(aggs.last_sample_s_[row]),
            int(aggs.total_samples[row]),
            float(aggs.creation_s[row]),
        ),
        _encode_hist(aggs.cpu, row),
        _encode_hist(aggs.memory, row),
        struct.pack("<I", len(series)),
    ]
    for s in series:
        key = aggs.series_key[s].encode("utf-8")
        parts.append(struct.pack("<H", len(key)) + key)
        parts.append(
            _SERIES.pack(
                float(aggs.series_last_cpu_s[s]),
                float(aggs.series_last_memory_s[s]),
                float(aggs.series_window_end_s[s]),
                float(aggs.series_memory_peak[s]),
                float(aggs.series_oom_peak[s]),
            )
        )
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("checkpoint is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, st: struct.Struct) -> tuple[Any, ...]:
        return st.unpack(self.take(st.size))


def _decode_hist(rd: _Reader, h: HistogramBatch, row: int) -> None:
    ref, total, lo, hi, k = rd.unpack(_HIST)
    b = h.options.num_buckets
    idx = np.frombuffer(rd.take(2 * k), dtype="<u2").astype(np.int64)
    vals = np.frombuffer(rd.take(8 * k), dtype="<f8")
    if lo >= b or hi >= b or (idx.size and idx.max() >= b):
        raise ValueError("checkpoint has a bucket outside the histogram")
    h.weight[row] = 0.0
    h.weight[row, idx] = vals
    h.total[row] = total
    h.min_bucket[row] = lo
    h.max_bucket[row] = hi
    h.reference_s[row] = ref


def decode_row(
    aggs: AggregateSet, row: int, blob: bytes
) -> tuple[list[str], list[tuple[float, ...]]]:
    """Load compact bytes into the empty aggregate ``row`` except its series, which
    are returned (keys, and the 5 values of each, ``_SERIES`` order) for the caller
    to add in one go (``AggregateSet.add_series_rows``). ValueError if corrupt."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise ValueError("checkpoint must be bytes")
    data = bytes(blob)
    if len(data) < _HEADER.size + 4 or data[:4] != MAGIC:
        raise ValueError("not a vpaweb engine checkpoint (bad magic)")
    (version,) = struct.unpack_from("<H", data, 4)
    if version != VERSION:
        raise ValueError(f"unsupported checkpoint version {version}")
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    if zlib.crc32(body) != crc:
        raise ValueError("checkpoint is corrupt (CRC mismatch)")
    rd = _Reader(body)
    _, _, nb_cpu, nb_mem, hl_cpu, hl_mem, window, first, last, count, created = (
        rd.unpack(_HEADER)
    )
    p = aggs.profile
    if (nb_cpu, nb_mem) != (
        aggs.cpu.options.num_buckets,
        aggs.memory.options.num_buckets,
    ):
        raise ValueError("checkpoint histograms have other bucket counts")
    if (hl_cpu, hl_mem, window) != (
        p.cpu_half_life_s,
        p.memory_half_life_s,
        p.memory_window_s,
    ):
        raise ValueError("checkpoint was made with other half-lives or memory window")
    _decode_hist(rd, aggs.cpu, row)
    _decode_hist(rd, aggs.memory, row)
    aggs.first_sample_s[row] = first
    aggs.last_sample_s_[row] = last
    aggs.total_samples[row] = count
    aggs.creation_s[row] = created
    (n_series,) = rd.unpack(_COUNT)
    keys: list[str] = []
    values: list[tuple[float, ...]] = []
    for _ in range(n_series):
        (klen,) = rd.unpack(_KEY_LENGTH)
        try:
            keys.append(rd.take(klen).decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError("checkpoint has a series key that is not UTF-8") from None
        values.append(rd.unpack(_SERIES))
    if rd.pos != len(body):
        raise ValueError("checkpoint has trailing bytes")
    return keys, values


# ------------------------------------------------------------------------ upstream v3
def rfc3339(t_s: float) -> str | None:
    """metav1.Time JSON: RFC 3339 UTC in whole seconds; None if unset."""
    if t_s is None or math.isnan(t_s):
        return None
    whole = math.floor(t_s)
    return (
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=whole)
    ).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> float:
    """Unix seconds of an RFC 3339 time (NaN for None/empty)."""
    if text is None or text == "":
        return math.nan
    try:
        value = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {text!r}") from None
    if value.tzinfo is None:
        raise ValueError(f"RFC 3339 time without a zone: {text!r}")
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return delta.days * 86400 + delta.seconds + delta.microseconds / 1e6


def _hist_status(h: HistogramBatch) -> dict[str, Any]:
    cp = h.save_v3(0)
    ref = cp.pop("referenceTimestamp", None)
    return {"referenceTimestamp": rfc3339(math.nan if ref is None else ref), **cp}


def vpa_status(
    aggs: AggregateSet,
    row: int,
    cpu: HistogramBatch,
    memory: HistogramBatch,
    now_s: float,
) -> dict[str, Any]:
    """Upstream VerticalPodAutoscalerCheckpointStatus of one-row histogram copies."""
    return {
        "lastUpdateTime": rfc3339(now_s),
        "version": SUPPORTED_VPA_CHECKPOINT_VERSION,
        "cpuHistogram": _hist_status(cpu),
        "memoryHistogram": _hist_status(memory),
        "firstSampleStart": rfc3339(float(aggs.first_sample_s[row])),
        "lastSampleStart": rfc3339(float(aggs.last_sample_s_[row])),
        "totalSamplesCount": int(aggs.total_samples[row]),
    }


def load_vpa_status(aggs: AggregateSet, row: int, status: dict[str, Any]) -> None:
    """Upstream ``AggregateContainerState.LoadFromCheckpoint`` into row ``row``."""
    if status.get("version") != SUPPORTED_VPA_CHECKPOINT_VERSION:
        raise ValueError(f"unsupported checkpoint version {status.get('version')!r}")
    count = int(status.get("totalSamplesCount", 0))
    if count < 0:
        raise ValueError("totalSamplesCount must be >= 0")
    aggs.total_samples[row] = count
    aggs.first_sample_s[row] = parse_rfc3339(status.get("firstSampleStart"))
    aggs.last_sample_s_[row] = parse_rfc3339(status.get("lastSampleStart"))
    for key, hist in (("memoryHistogram", aggs.memory), ("cpuHistogram", aggs.cpu)):
        cp = dict(status.get(key) or {})
        if "referenceTimestamp" in cp:
            cp["referenceTimestamp"] = parse_rfc3339(cp["referenceTimestamp"])
            if math.isnan(cp["referenceTimestamp"]):
                cp["referenceTimestamp"] = None
        hist.load_v3(row, cp)
