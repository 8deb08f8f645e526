"""Nodes a pool needs for a set of pods: first-fit decreasing on requests."""
# ``pack`` places pods (cpu millicores, memory bytes of requests) on alike nodes of
# ``node`` allocatable, less ``overhead`` (the DaemonSet pods every node runs, and the
# pod slots they take), honouring the per-node pod limit. Pods are taken largest
# first by their dominant share of a node (max of cpu and memory share; ties by cpu,
# then memory), each onto the first open node with room, else a new node. A pod that
# fits no empty node is not placed and is counted in ``Packing.unplaceable``.
# Identical pods are placed together: one vectorised comparison finds every open
# node with room for one, which are filled in order (placing on one changes no
# other), and the rest open new nodes in bulk; the cost grows with distinct sizes.

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


class _OpenNodes:
    """The open nodes' free cpu, memory and pod slots in opening order (arrays
    grown by doubling). A node without a free pod slot shows cpu -1 in ``room``,
    so one comparison of ``room`` and one of ``mem`` find every node with room."""

    def __init__(self, cap_cpu: int, cap_mem: int, cap_pods: int) -> None:
        self.cap = (cap_cpu, cap_mem, cap_pods)
        self.opened = 0
        self.room = np.empty(1024, dtype=np.int64)
        self.mem = np.empty(1024, dtype=np.int64)
        self.slots = np.empty(1024, dtype=np.int64)

    def place(self, cpu: int, mem: int, count: int) -> None:
        """First fit of ``count`` pods of (cpu, mem): as many as fit on the first
        open node with room, then the next with room, then new nodes in order."""
        left = count
        n = self.opened
        if n:
            room, free_mem, slots = self.room, self.mem, self.slots
            # Nodes with room for one pod now: placing on one changes no other.
            with_room = (room[:n] >= cpu) & (free_mem[:n] >= mem)
            for node in with_room.nonzero()[0].tolist():
                have_slots = int(slots[node])
                take = min(
                    left,
                    have_slots,
                    int(room[node]) // cpu if cpu > 0 else left,
                    int(free_mem[node]) // mem if mem > 0 else left,
                )
                slots[node] = have_slots - take
                room[node] = room[node] - take * cpu if take < have_slots else -1
                free_mem[node] -= take * mem
                left -= take
                if not left:
                    return
        cap_cpu, cap_mem, cap_pods = self.cap
        per_node = min(
            cap_cpu // cpu if cpu > 0 else cap_pods,
            cap_mem // mem if mem > 0 else cap_pods,
            cap_pods,
        )
        new = -(-left // per_node)
        start, end = n, n + new
        if end > self.room.size:
            size = max(2 * self.room.size, end)
            for name in ("room", "mem", "slots"):
                grown = np.empty(size, dtype=np.int64)
                grown[:start] = getattr(self, name)[:start]
                setattr(self, name, grown)
        held = np.full(new, per_node, dtype=np.int64)
        held[-1] = left - per_node * (new - 1)
        self.slots[start:end] = cap_pods - held
        self.room[start:end] = np.where(
            held < cap_pods, cap_cpu - held * cpu, np.int64(-1)
        )
        self.mem[start:end] = cap_mem - held * mem
        self.opened = end


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
    for c, m, count in zip(
        cpu[starts].tolist(), mem[starts].tolist(), counts.tolist(), strict=True
    ):
        nodes.place(c, m, count)
    return Packing(nodes=nodes.opened, placed=int(cpu.size), unplaceable=unplaceable)
