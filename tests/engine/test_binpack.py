"""First-fit decreasing onto a node pool (engine/binpack.py), on hand-checked cases
and against a pod-by-pod first fit on random pods."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender.engine.binpack import NodeRoom, NodeShape, Packing, pack, pack_onto

GIB = 2**30
NODE = NodeShape(cpu_millicores=10_000, memory_bytes=64 * GIB, pods=110)


def cores(*values: float) -> tuple[np.ndarray, np.ndarray]:
    cpu = np.array([round(v * 1000) for v in values], dtype=np.int64)
    return cpu, np.zeros_like(cpu)


def test_first_fit_decreasing_on_a_known_instance():
    # Sizes 5,4,4,3,2,2 on 10-core nodes: 5+4 | 4+3+2 | 2 (the best is two nodes,
    # 5+3+2 | 4+4+2; first fit decreasing needs three).
    assert pack(*cores(2, 4, 3, 5, 2, 4), node=NODE) == Packing(3, 6, 0, spare=3)
    # 6,5,4,3,2: 6+4 | 5+3+2.
    assert pack(*cores(3, 6, 2, 5, 4), node=NODE) == Packing(2, 5, 0, spare=2)


def test_daemonset_pods_take_their_share_of_every_node():
    cpu, mem = cores(*[2.5] * 8)
    assert pack(cpu, mem, node=NODE).nodes == 2  # four a node
    # 2 cores of DaemonSets on each node leave room for three.
    overhead = NodeShape(cpu_millicores=2_000, memory_bytes=GIB, pods=2)
    assert pack(cpu, mem, node=NODE, overhead=overhead).nodes == 3


def test_the_pod_limit_caps_pods_a_node():
    node = NodeShape(cpu_millicores=10_000, memory_bytes=64 * GIB, pods=10)
    cpu, mem = cores(*[0.1] * 20)
    assert pack(cpu, mem, node=node).nodes == 2
    # Two DaemonSet pods a node leave eight slots: 20 pods need three nodes.
    overhead = NodeShape(0, 0, pods=2)
    assert pack(cpu, mem, node=node, overhead=overhead) == Packing(3, 20, 0, spare=3)


def test_memory_decides_when_it_is_the_larger_share():
    # 1 core and 40 GiB each: two do not share a 64 GiB node.
    cpu = np.full(3, 1000, dtype=np.int64)
    mem = np.full(3, 40 * GIB, dtype=np.int64)
    assert pack(cpu, mem, node=NODE).nodes == 3


def test_a_pod_larger_than_any_node_is_counted_apart():
    cpu, mem = cores(12, 3, 3)
    assert pack(cpu, mem, node=NODE) == Packing(
        nodes=1, placed=2, unplaceable=1, spare=1
    )
    # Larger than what the DaemonSets leave counts too.
    overhead = NodeShape(cpu_millicores=8_000, memory_bytes=0, pods=0)
    assert pack(cpu, mem, node=NODE, overhead=overhead) == Packing(0, 0, 3)


def test_no_pods_need_no_nodes():
    empty = np.zeros(0, dtype=np.int64)
    assert pack(empty, empty, node=NODE) == Packing(0, 0, 0)


def test_mismatched_arrays_are_refused():
    with pytest.raises(ValueError):
        pack(np.zeros(2), np.zeros(3), node=NODE)


def one_by_one(cpu: np.ndarray, mem: np.ndarray, node: NodeShape) -> int:
    """First fit decreasing, one pod at a time (the definition)."""
    share = np.maximum(cpu / node.cpu_millicores, mem / node.memory_bytes)
    order = np.lexsort((-mem, -cpu, -share))
    free: list[list[int]] = []
    for i in order:
        for room in free:
            if room[0] >= cpu[i] and room[1] >= mem[i] and room[2] >= 1:
                room[0] -= cpu[i]
                room[1] -= mem[i]
                room[2] -= 1
                break
        else:
            free.append(
                [
                    node.cpu_millicores - cpu[i],
                    node.memory_bytes - mem[i],
                    node.pods - 1,
                ]
            )
    return len(free)


@pytest.mark.parametrize("seed", range(5))
def test_alike_pods_placed_together_match_first_fit_pod_by_pod(seed):
    rng = np.random.default_rng(seed)
    kinds = 12
    kind_cpu = rng.choice([100, 250, 500, 1000, 2000, 3500], size=kinds)
    kind_mem = rng.choice([128, 512, 1024, 4096, 16384], size=kinds) * 2**20
    picks = rng.integers(0, kinds, size=400)
    cpu, mem = kind_cpu[picks].astype(np.int64), kind_mem[picks].astype(np.int64)
    node = NodeShape(cpu_millicores=8_000, memory_bytes=32 * GIB, pods=30)
    assert pack(cpu, mem, node=node).nodes == one_by_one(cpu, mem, node)


def test_many_blocks_of_open_nodes_match_first_fit_pod_by_pod():
    # Hundreds of nodes (several blocks of open nodes), sizes of every kind.
    rng = np.random.default_rng(42)
    cpu = rng.choice([50, 120, 300, 700, 1500], size=2500).astype(np.int64)
    mem = (rng.choice([64, 200, 900, 3000], size=2500) * 2**20).astype(np.int64)
    node = NodeShape(cpu_millicores=4_000, memory_bytes=16 * GIB, pods=12)
    expected = one_by_one(cpu, mem, node)
    assert expected > 300
    assert pack(cpu, mem, node=node).nodes == expected


SIZES = st.tuples(
    st.integers(0, 5_000),  # millicores
    st.integers(0, 20).map(lambda gib_eighths: gib_eighths * GIB // 8),
)


@settings(max_examples=200, deadline=None)
@given(
    pods=st.lists(SIZES, max_size=60),
    repeats=st.lists(st.integers(1, 6), min_size=60, max_size=60),
    node_cpu=st.integers(1_000, 8_000),
    node_gib=st.integers(1, 4),
    node_pods=st.integers(1, 12),
)
def test_the_packer_uses_as_many_nodes_as_first_fit_pod_by_pod(
    pods, repeats, node_cpu, node_gib, node_pods
):
    # Random small instances, with runs of alike pods (repeats) and pods too
    # large for a node (counted apart; the reference gets only those that fit).
    sizes = [
        size
        for size, times in zip(pods, repeats[: len(pods)], strict=True)
        for _ in range(times)
    ]
    cpu = np.array([c for c, _ in sizes], dtype=np.int64)
    mem = np.array([m for _, m in sizes], dtype=np.int64)
    node = NodeShape(node_cpu, node_gib * GIB, node_pods)
    fits = (cpu <= node.cpu_millicores) & (mem <= node.memory_bytes)
    packing = pack(cpu, mem, node=node)
    assert packing.unplaceable == int(np.count_nonzero(~fits))
    assert packing.nodes == one_by_one(cpu[fits], mem[fits], node)


# --- onto a pool's own nodes (pack_onto) --------------------------------------------


def onto_one_by_one(
    cpu: np.ndarray, mem: np.ndarray, rooms: list[list[int]], spare: NodeShape
) -> tuple[int, int]:
    """First fit decreasing onto the given rooms in order, then spare nodes, one pod
    at a time (the definition): (nodes holding a pod, pods placed)."""
    share = np.maximum(cpu / spare.cpu_millicores, mem / spare.memory_bytes)
    order = np.lexsort((-mem, -cpu, -share))
    free = [list(r) for r in rooms]
    used = [False] * len(free)
    placed = 0
    for i in order:
        for n, room in enumerate(free):
            if room[0] >= cpu[i] and room[1] >= mem[i] and room[2] >= 1:
                room[0] -= cpu[i]
                room[1] -= mem[i]
                room[2] -= 1
                used[n] = True
                placed += 1
                break
        else:
            if (
                cpu[i] <= spare.cpu_millicores
                and mem[i] <= spare.memory_bytes
                and spare.pods >= 1
            ):
                free.append(
                    [
                        spare.cpu_millicores - cpu[i],
                        spare.memory_bytes - mem[i],
                        spare.pods - 1,
                    ]
                )
                used.append(True)
                placed += 1
    return sum(used), placed


@settings(max_examples=200, deadline=None)
@given(
    pods=st.lists(SIZES, max_size=40),
    repeats=st.lists(st.integers(1, 4), min_size=40, max_size=40),
    rooms=st.lists(
        st.tuples(
            st.integers(-500, 8_000),
            st.integers(0, 4).map(lambda gib: gib * GIB),
            st.integers(0, 12),
        ),
        max_size=10,
    ),
    spare_cpu=st.integers(1_000, 8_000),
    spare_pods=st.integers(1, 12),
)
def test_packing_onto_given_nodes_matches_first_fit_pod_by_pod(
    pods, repeats, rooms, spare_cpu, spare_pods
):
    sizes = [
        size
        for size, times in zip(pods, repeats[: len(pods)], strict=True)
        for _ in range(times)
    ]
    cpu = np.array([c for c, _ in sizes], dtype=np.int64)
    mem = np.array([m for _, m in sizes], dtype=np.int64)
    spare = NodeShape(spare_cpu, 2 * GIB, spare_pods)
    room = NodeRoom(
        np.array([r[0] for r in rooms], dtype=np.int64),
        np.array([r[1] for r in rooms], dtype=np.int64),
        np.array([r[2] for r in rooms], dtype=np.int64),
    )
    packing = pack_onto(cpu, mem, room=room, spare=spare)
    nodes, placed = onto_one_by_one(cpu, mem, [list(r) for r in rooms], spare)
    assert (packing.nodes, packing.placed) == (nodes, placed)
    assert packing.placed + packing.unplaceable == len(sizes)
    assert packing.spare <= packing.nodes


def test_without_spare_nodes_the_pods_left_over_are_counted_unplaceable():
    room = NodeRoom(
        np.array([4000], dtype=np.int64),
        np.array([8 * GIB], dtype=np.int64),
        np.array([10], dtype=np.int64),
    )
    cpu, mem = cores(3, 3, 3)
    assert pack_onto(cpu, mem, room=room) == Packing(1, 1, 2, spare=0)


def test_a_room_of_another_length_is_refused():
    room = NodeRoom(
        np.zeros(2, dtype=np.int64),
        np.zeros(3, dtype=np.int64),
        np.zeros(2, dtype=np.int64),
    )
    with pytest.raises(ValueError):
        pack_onto(np.zeros(1), np.zeros(1), room=room)
