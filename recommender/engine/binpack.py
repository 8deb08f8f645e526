"""Nodes a pool needs for a set of pods: first-fit decreasing on requests."""
# ``pack_onto`` places pods (cpu millicores, memory bytes of requests) onto a pool's
# nodes, each with its own room (its allocatable less the DaemonSet pods it runs, and
# the pod slots they leave), taken in the given order, then onto new ``spare`` nodes
# when those are full. Pods are taken largest first by their dominant share of a node
# (max of cpu and memory share; ties by cpu, then memory), each onto the first node
# with room. The nodes needed are the nodes that hold a pod. A pod that fits no node
# (none of the given ones when empty, nor a spare one) or finds none left is not
# placed and is counted in ``Packing.unplaceable``: placed + unplaceable = pods.
# ``pack`` is the same onto alike nodes (no given ones, spares of ``node`` less
# ``overhead``).
# Identical pods are placed together: one vectorised comparison finds every node with
# room for one, which are filled in order (placing on one changes no other), and the
# rest open spare nodes in bulk; the cost grows with distinct sizes, not pods.

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NodeShape:
    """What one node offers, or what it already runs on every node (overhead)."""

    cpu_millicores: int
    memory_bytes: int
    pods: int


@dataclass(frozen=True)
class NodeRoom:
    """The room of each of a pool's nodes, in the order they are filled (axis 0 =
    node): free cpu millicores, memory bytes and pod slots (negative: none)."""

    cpu_millicores: np.ndarray
    memory_bytes: np.ndarray
    pods: np.ndarray

    @classmethod
    def none(cls) -> NodeRoom:
        """No given nodes (every pod goes onto spare ones)."""
        empty = np.zeros(0, dtype=np.int64)
        return cls(empty, empty, empty)


@dataclass(frozen=True)
class Packing:
    """Nodes the placed pods need (given ones holding a pod, plus spare ones opened),
    the pods placed, the pods not placed, and how many of the nodes are spare."""

    nodes: int
    placed: int
    unplaceable: int
    spare: int = 0


class _OpenNodes:
    """The nodes' free cpu, memory and pod slots in filling order (arrays grown by
    doubling when spare nodes open). A node without a free pod slot shows cpu -1 in
    ``room``, so one comparison of ``room`` and one of ``mem`` find every node with
    room."""

    def __init__(self, given: NodeRoom, spare: NodeShape | None) -> None:
        self.spare = spare
        n = int(given.cpu_millicores.size)
        size = max(1024, n)
        self.room = np.empty(size, dtype=np.int64)
        self.mem = np.empty(size, dtype=np.int64)
        self.slots = np.empty(size, dtype=np.int64)
        self.used = np.zeros(size, dtype=bool)
        self.slots[:n] = given.pods
        self.room[:n] = np.where(given.pods >= 1, given.cpu_millicores, -1)
        self.mem[:n] = given.memory_bytes
        self.given = self.opened = n
        self.unplaced = 0

    def place(self, cpu: int, mem: int, count: int) -> None:
        """First fit of ``count`` pods of (cpu, mem): as many as fit on the first
        node with room, then the next with room, then new spare nodes in order."""
        left = count
        n = self.opened
        if n:
            room, free_mem, slots = self.room, self.mem, self.slots
            # Nodes with room for one pod now: placing on one changes no other, and
            # each takes at least one, so the first ``left`` of them are enough.
            with_room = np.flatnonzero((room[:n] >= cpu) & (free_mem[:n] >= mem))
            for node in with_room[:left].tolist():
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
                self.used[node] = True
                left -= take
                if not left:
                    return
        spare = self.spare
        per_node = (
            0
            if spare is None
            else min(
                spare.cpu_millicores // cpu if cpu > 0 else spare.pods,
                spare.memory_bytes // mem if mem > 0 else spare.pods,
                spare.pods,
            )
        )
        if per_node < 1:
            self.unplaced += left  # fits no spare node, and no given one is left
            return
        assert spare is not None
        new = -(-left // per_node)
        start, end = n, n + new
        if end > self.room.size:
            size = max(2 * self.room.size, end)
            for name in ("room", "mem", "slots", "used"):
                old = getattr(self, name)
                grown = np.zeros(size, dtype=old.dtype)
                grown[:start] = old[:start]
                setattr(self, name, grown)
        held = np.full(new, per_node, dtype=np.int64)
        held[-1] = left - per_node * (new - 1)
        self.slots[start:end] = spare.pods - held
        self.room[start:end] = np.where(
            held < spare.pods, spare.cpu_millicores - held * cpu, np.int64(-1)
        )
        self.mem[start:end] = spare.memory_bytes - held * mem
        self.used[start:end] = True
        self.opened = end


def largest(shapes: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The (cpu, memory) shapes no other beats in both, largest cpu first: a pod
    fits one of ``shapes`` exactly when it fits one of these."""
    front: list[tuple[int, int]] = []
    for c, m in sorted(set(shapes), key=lambda s: (-s[0], -s[1])):
        if not front or m > front[-1][1]:
            front.append((c, m))
    return tuple(front)


def fits_a_node(shapes: Iterable[tuple[int, int]], cpu: int, memory: int) -> bool:
    """Whether a pod of (cpu millicores, memory bytes) fits one of the (cpu,
    memory) ``shapes``."""
    return any(cpu <= c and memory <= m for c, m in shapes)


def _fits_any(
    cpu: np.ndarray, mem: np.ndarray, given: NodeRoom, spare: NodeShape | None
) -> np.ndarray:
    """Whether each pod fits one of the given nodes when empty, or a spare one."""
    open_ = given.pods >= 1
    shapes = list(
        zip(
            given.cpu_millicores[open_].tolist(),
            given.memory_bytes[open_].tolist(),
            strict=True,
        )
    )
    if spare is not None and spare.pods >= 1:
        shapes.append((spare.cpu_millicores, spare.memory_bytes))
    fits = np.zeros(cpu.shape, dtype=bool)
    for c, m in largest(shapes):
        fits |= (cpu <= c) & (mem <= m)
    return fits


def pack_onto(
    cpu_millicores: np.ndarray,
    memory_bytes: np.ndarray,
    *,
    room: NodeRoom,
    spare: NodeShape | None = None,
) -> Packing:
    """First-fit decreasing of the pods (one request pair each, requests only) onto
    the nodes of ``room`` in order, then onto new nodes of ``spare`` room."""
    cpu = np.asarray(cpu_millicores, dtype=np.int64)
    mem = np.asarray(memory_bytes, dtype=np.int64)
    if cpu.shape != mem.shape or cpu.ndim != 1:
        raise ValueError("cpu and memory requests must be 1-D arrays of one length")
    sizes = {a.shape for a in (room.cpu_millicores, room.memory_bytes, room.pods)}
    if len(sizes) != 1 or room.cpu_millicores.ndim != 1:
        raise ValueError("room's cpu, memory and pods must be 1-D of one length")
    given = NodeRoom(
        *(
            np.asarray(a, dtype=np.int64)
            for a in (room.cpu_millicores, room.memory_bytes, room.pods)
        )
    )
    cpu = np.maximum(cpu, 0)
    mem = np.maximum(mem, 0)
    fits = _fits_any(cpu, mem, given, spare)
    unplaceable = int(np.count_nonzero(~fits))
    cpu, mem = cpu[fits], mem[fits]
    if cpu.size == 0:
        return Packing(nodes=0, placed=0, unplaceable=unplaceable)
    # Shares of the spare node, else of the largest given room, as the pods' order.
    if spare is not None:
        scale_cpu, scale_mem = spare.cpu_millicores, spare.memory_bytes
    else:
        scale_cpu = int(given.cpu_millicores.max(initial=0))
        scale_mem = int(given.memory_bytes.max(initial=0))
    share = np.maximum(
        cpu / max(scale_cpu, 1) if scale_cpu > 0 else 0.0,
        mem / max(scale_mem, 1) if scale_mem > 0 else 0.0,
    )
    order = np.lexsort((-mem, -cpu, -share))
    cpu, mem = cpu[order], mem[order]
    # Runs of identical pods: their starts and lengths.
    change = np.flatnonzero((np.diff(cpu) != 0) | (np.diff(mem) != 0)) + 1
    starts = np.concatenate(([0], change))
    counts = np.diff(np.concatenate((starts, [cpu.size])))
    nodes = _OpenNodes(given, spare)
    for c, m, count in zip(
        cpu[starts].tolist(), mem[starts].tolist(), counts.tolist(), strict=True
    ):
        nodes.place(c, m, count)
    return Packing(
        nodes=int(np.count_nonzero(nodes.used[: nodes.opened])),
        placed=int(cpu.size) - nodes.unplaced,
        unplaceable=unplaceable + nodes.unplaced,
        spare=nodes.opened - nodes.given,
    )


def pack(
    cpu_millicores: np.ndarray,
    memory_bytes: np.ndarray,
    *,
    node: NodeShape,
    overhead: NodeShape = NodeShape(0, 0, 0),
) -> Packing:
    """First-fit decreasing of the pods onto alike new nodes of ``node`` allocatable
    less ``overhead``."""
    return pack_onto(
        cpu_millicores,
        memory_bytes,
        room=NodeRoom.none(),
        spare=NodeShape(
            node.cpu_millicores - overhead.cpu_millicores,
            node.memory_bytes - overhead.memory_bytes,
            node.pods - overhead.pods,
        ),
    )
