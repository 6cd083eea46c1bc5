"""The lowering's placement order (cosim::PlacementOrder in the plugin) against the Python Kahn pass it replaced,
kept here as the reference: the order numbers the DAG's ops, so it must be the same, item for item."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import plugin
from cosim.collectives.lower import _calls, _match_recvs, _placement_order
from cosim.workload.builder import build_trace
from cosim.workload.hardware import get_hardware
from cosim.workload.model import get_model
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import read_trace
from tests.test_collectives_lower import EXAMPLES


def reference_order(dep_ptr, dep_idx, call_of_op, call_ptr, call_ops, recv_of_send) -> tuple[np.ndarray, np.ndarray]:
    """The plugin's pass in Python (Kahn over ops and whole collective calls, level by level, each level in
    increasing op index): (item, is_call) of the items it places, which are all of them unless some can never
    run."""
    n = dep_ptr.size - 1
    counts = np.diff(dep_ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    children = owner[np.argsort(dep_idx, kind="stable")].tolist()
    child_ptr = np.concatenate([[0], np.cumsum(np.bincount(dep_idx, minlength=n))]).tolist()
    remaining = counts.copy()
    remaining[recv_of_send[recv_of_send >= 0]] += 1  # a recv also waits for its send
    level = np.flatnonzero(remaining == 0).tolist()
    remaining = remaining.tolist()
    call_of = call_of_op.tolist()
    recv_of = recv_of_send.tolist()
    members = [call_ops[a:b].tolist() for a, b in zip(call_ptr[:-1].tolist(), call_ptr[1:].tolist())]
    pending = np.diff(call_ptr).tolist()
    out, out_is_call = [], []
    while level:
        nxt = []
        for i in level:
            c = call_of[i]
            if c >= 0:
                pending[c] -= 1
                if pending[c]:
                    continue
                out.append(c)
                out_is_call.append(True)
                finished = members[c]
            else:
                out.append(i)
                out_is_call.append(False)
                finished = (i,)
                r = recv_of[i]
                if r >= 0:
                    remaining[r] -= 1
                    if remaining[r] == 0:
                        nxt.append(r)
            for j in finished:
                for ch in children[child_ptr[j]:child_ptr[j + 1]]:
                    remaining[ch] -= 1
                    if remaining[ch] == 0:
                        nxt.append(ch)
        level = sorted(nxt)
    return np.asarray(out, np.int64), np.asarray(out_is_call, bool)


def plugin_order(dep_ptr, dep_idx, call_of_op, call_ptr, call_ops, recv_of_send) -> tuple[np.ndarray, np.ndarray]:
    n, n_calls = dep_ptr.size - 1, call_ptr.size - 1
    cap = n - call_ops.size + n_calls
    item, is_call = np.empty(max(cap, 1), np.int64), np.empty(max(cap, 1), np.uint8)
    args = [plugin.pointer(np.ascontiguousarray(a, t)) for a, t in (
        (dep_ptr, np.int64), (dep_idx, np.int64), (call_of_op, np.int32), (call_ptr, np.int64), (call_ops, np.int64),
        (recv_of_send, np.int32))]
    placed = int(plugin.namespace().PlacementOrder(args[0], args[1], n, args[2], args[3], args[4], n_calls, args[5],
                                                   item, is_call, cap))
    return item[:placed], is_call[:placed].view(bool)


def random_graph(rng: np.random.Generator, n: int, acyclic: bool):
    """Ops with up to 4 dependencies each (on earlier ops when ``acyclic``, repeats allowed), some grouped into
    collective calls and some matched send -> recv."""
    deg = rng.integers(0, 5, n)
    deg[0] = 0
    dep_idx = np.concatenate([rng.integers(0, i if acyclic else n, d) if i or not acyclic else np.zeros(0, np.int64)
                              for i, d in enumerate(deg)]).astype(np.int64)
    dep_ptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    in_call = np.flatnonzero(rng.random(n) < 0.4)
    call_inv = rng.integers(0, max(1, in_call.size // 3), in_call.size)
    _, call_inv = np.unique(call_inv, return_inverse=True)  # every call has a member
    call_of_op = np.full(n, -1, np.int32)
    call_of_op[in_call] = call_inv
    call_ops = in_call[np.argsort(call_inv, kind="stable")].astype(np.int64)
    call_ptr = np.concatenate([[0], np.cumsum(np.bincount(call_inv, minlength=call_inv.max(initial=-1) + 1))])
    free = rng.permutation(np.flatnonzero(call_of_op < 0))
    pairs = free[: 2 * (free.size // 4)].reshape(-1, 2)
    pairs.sort(axis=1)  # send before recv, as a trace orders them
    recv_of_send = np.full(n, -1, np.int32)
    recv_of_send[pairs[:, 0]] = pairs[:, 1]
    return dep_ptr, dep_idx, call_of_op, call_ptr.astype(np.int64), call_ops, recv_of_send


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_are_placed_in_the_reference_order(seed):
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(1, 400)), acyclic=seed % 4 != 3)  # every fourth may deadlock
    ref_item, ref_call = reference_order(*graph)
    item, is_call = plugin_order(*graph)
    np.testing.assert_array_equal(item, ref_item)
    np.testing.assert_array_equal(is_call, ref_call)


def test_a_graph_with_nothing_to_place():
    empty = np.zeros(0, np.int64)
    item, is_call = plugin_order(np.zeros(1, np.int64), empty, np.zeros(0, np.int32), np.zeros(1, np.int64), empty,
                                 np.zeros(0, np.int32))
    assert item.size == 0 and is_call.size == 0


def _built(**par):
    model = get_model("mixtral-8x7b" if par.get("ep", 1) > 1 else "llama2-7b", num_layers=4)
    return build_trace(model, ParallelismSpec(**par), get_hardware("h100", gpus_per_host=8))


BUILT = {
    "tp2-pp2-dp2": dict(tp=2, pp=2, dp=2, global_batch_size=8),
    "tp2-pp2-vpp2-sp": dict(tp=2, pp=2, vpp=2, sequence_parallel=True, global_batch_size=4),
    "dp4-zero3": dict(dp=4, zero_stage=3, global_batch_size=8),
    "tp2-cp2-dp2-zero1-recompute": dict(tp=2, cp=2, dp=2, zero_stage=1, recompute=True, global_batch_size=4),
    "pp4-uneven": dict(pp=4, pipeline_layers=(1, 1, 1, 1), global_batch_size=8),
    "dp4-ep4-two-microbatch": dict(dp=4, ep=4, moe_overlap="two_microbatch", micro_batch_size=2,
                                   global_batch_size=8),
}


@pytest.mark.parametrize("name", [p.stem for p in EXAMPLES] + list(BUILT))
def test_traces_of_every_parallelism_are_placed_in_the_reference_order(name):
    trace = _built(**BUILT[name]) if name in BUILT else read_trace(next(p for p in EXAMPLES if p.stem == name))
    _, _, call_of_op, call_ops, call_ptr = _calls(trace)
    recv_of_send, _ = _match_recvs(trace)
    item, is_call = _placement_order(trace, call_of_op, call_ptr, call_ops, recv_of_send)
    ref_item, ref_call = reference_order(trace.dep_ptr, trace.dep_idx, call_of_op, call_ptr, call_ops, recv_of_send)
    np.testing.assert_array_equal(item, ref_item)
    np.testing.assert_array_equal(is_call, ref_call)
    assert item.size == trace.n_ops - call_ops.size + call_ptr.size - 1
