"""Nodes a pool needs for a set of pods: first-fit decreasing on requests.

``pack`` places pods (cpu millicores, memory bytes of requests) on alike nodes of
``node`` allocatable, less ``overhead`` (the DaemonSet pods every node runs, and the
pod slots they take), honouring the per-node pod limit. Pods are taken largest
first by their dominant share of a node (max of cpu and memory share; ties by cpu,
then memory), each onto the first open node with room, else a new node. A pod that
fits no empty node is not placed and is counted in ``Packing.unplaceable``.
Identical pods are placed together (first fit of n alike pods fills the open nodes
in order), so the cost grows with distinct pod sizes, not with pods.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NodeShape:
    """What one node offers, or what it already runs on every node (overhead)."""

    cpu_millicores: int
    memory_bytes: int
    pods: int


@dataclass(frozen=True)
class Packing:
    """Nodes the placed pods need, and the pods no node of the shape can hold."""

    nodes: int
    placed: int
    unplaceable: int


def _per_node(free: np.ndarray, cpu: int, mem: int) -> np.ndarray:
    """How many pods of (cpu, mem) fit on each node of ``free`` (cpu, memory, pod
    rows)."""
    fits: np.ndarray = free[2].copy()
    if cpu > 0:
        np.minimum(fits, free[0] // cpu, out=fits)
    if mem > 0:
        np.minimum(fits, free[1] // mem, out=fits)
    return fits


class _OpenNodes:
    """The open nodes' free amounts, in opening order, with each block of
    ``BLOCK`` nodes' largest free amounts: a block without the room is skipped, the
    others are searched a span of ``SPAN`` nodes at a time (doubling)."""

    BLOCK = 64
    SPAN = 256

    def __init__(self, cap_cpu: int, cap_mem: int, cap_pods: int) -> None:
        self.cap = (cap_cpu, cap_mem, cap_pods)
        self.opened = 0
        self.free = np.empty((3, 1024), dtype=np.int64)
        self.block_max = np.empty((3, 1024 // self.BLOCK), dtype=np.int64)

    def _refresh(self, lo: int, hi: int) -> None:
        """Recompute the maxima of the blocks holding nodes lo..hi-1."""
        first, last = lo // self.BLOCK, -(-hi // self.BLOCK)
        start, end = first * self.BLOCK, min(last * self.BLOCK, self.opened)
        starts = np.arange(0, end - start, self.BLOCK)
        self.block_max[:, first:last] = np.maximum.reduceat(
            self.free[:, start:end], starts, axis=1
        )

    def place(self, cpu: int, mem: int, count: int) -> None:
        """First fit of ``count`` pods of (cpu, mem): fill the open nodes with room
        in order, then open new ones."""
        left = count
        blocks = -(-self.opened // self.BLOCK)
        if blocks:
            bm = self.block_max[:, :blocks]
            room = np.flatnonzero((bm[0] >= cpu) & (bm[1] >= mem) & (bm[2] >= 1))
            one = np.array([[cpu], [mem], [1]], dtype=np.int64)
            at, span = 0, self.SPAN
            while left and at < room.size:
                lo = int(room[at]) * self.BLOCK
                hi = min(self.opened, lo + span)
                free = self.free[:, lo:hi]
                fit = _per_node(free, cpu, mem)
                total = fit.cumsum()
                if total[-1]:
                    if total[-1] >= left:
                        last = int(total.searchsorted(left))
                        take = fit[: last + 1].copy()
                        take[last] -= int(total[last]) - left
                        left = 0
                    else:
                        take = fit
                        left -= int(total[-1])
                    n = take.size
                    free[:, :n] -= take * one
                    self._refresh(lo, lo + n)
                at = int(room.searchsorted(-(-hi // self.BLOCK)))
                span *= 2
            if not left:
                return
        cap_cpu, cap_mem, cap_pods = self.cap
        per_node = min(
            cap_cpu // cpu if cpu > 0 else cap_pods,
            cap_mem // mem if mem > 0 else cap_pods,
            cap_pods,
        )
        new = -(-left // per_node)
        start, end = self.opened, self.opened + new
        if end > self.free.shape[1]:
            size = max(2 * self.free.shape[1], end + self.BLOCK)
            grown = np.empty((3, size), dtype=np.int64)
            grown[:, :start] = self.free[:, :start]
            self.free = grown
            maxima = np.empty((3, -(-size // self.BLOCK)), dtype=np.int64)
            maxima[:, : self.block_max.shape[1]] = self.block_max
            self.block_max = maxima
        held = np.full(new, per_node, dtype=np.int64)
        held[-1] = left - per_node * (new - 1)
        self.free[0, start:end] = cap_cpu - held * cpu
        self.free[1, start:end] = cap_mem - held * mem
        self.free[2, start:end] = cap_pods - held
        self.opened = end
        self._refresh(start, end)


def pack(
    cpu_millicores: np.ndarray,
    memory_bytes: np.ndarray,
    *,
    node: NodeShape,
    overhead: NodeShape = NodeShape(0, 0, 0),
) -> Packing:
    """First-fit decreasing of the pods (one request pair each, requests only) onto
    nodes of ``node`` allocatable less ``overhead``."""
    cpu = np.asarray(cpu_millicores, dtype=np.int64)
    mem = np.asarray(memory_bytes, dtype=np.int64)
    if cpu.shape != mem.shape or cpu.ndim != 1:
        raise ValueError("cpu and memory requests must be 1-D arrays of one length")
    cap_cpu = node.cpu_millicores - overhead.cpu_millicores
    cap_mem = node.memory_bytes - overhead.memory_bytes
    cap_pods = node.pods - overhead.pods
    cpu = np.maximum(cpu, 0)
    mem = np.maximum(mem, 0)
    fits = (cpu <= cap_cpu) & (mem <= cap_mem) & (cap_pods >= 1)
    unplaceable = int(np.count_nonzero(~fits))
    cpu, mem = cpu[fits], mem[fits]
    if cpu.size == 0:
        return Packing(nodes=0, placed=0, unplaceable=unplaceable)
    share = np.maximum(
        cpu / max(cap_cpu, 1) if cap_cpu > 0 else 0.0,
        mem / max(cap_mem, 1) if cap_mem > 0 else 0.0,
    )
    order = np.lexsort((-mem, -cpu, -share))
    cpu, mem = cpu[order], mem[order]
    # Runs of identical pods: their starts and lengths.
    change = np.flatnonzero((np.diff(cpu) != 0) | (np.diff(mem) != 0)) + 1
    starts = np.concatenate(([0], change))
    counts = np.diff(np.concatenate((starts, [cpu.size])))
    nodes = _OpenNodes(cap_cpu, cap_mem, cap_pods)
    for start, count in zip(starts.tolist(), counts.tolist(), strict=True):
        nodes.place(int(cpu[start]), int(mem[start]), count)
    return Packing(nodes=nodes.opened, placed=int(cpu.size), unplaceable=unplaceable)
