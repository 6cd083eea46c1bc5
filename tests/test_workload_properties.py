"""Property tests over random valid specs: conservation of FLOPs, bytes and op counts; no deadlock."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cosim.workload import sizes as sz
from cosim.workload.builder import build_trace
from cosim.workload.chakra import read_chakra, write_chakra
from cosim.workload.flops import sequence_forward_flops
from cosim.workload.hardware import get_hardware
from cosim.workload.layout import make_layout
from cosim.workload.model import ModelSpec
from cosim.workload.parallelism import ParallelismSpec
from cosim.workload.trace import (
    CollKind,
    GroupKind,
    OpKind,
    Phase,
    read_trace,
    write_trace,
)
from cosim.workload.validate import check_trace

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def specs(draw):
    heads = draw(st.sampled_from([2, 4, 8]))
    kv = draw(st.sampled_from([d for d in (1, 2, 4, 8) if heads % d == 0]))
    h = heads * draw(st.sampled_from([8, 16]))
    experts = draw(st.sampled_from([1, 1, 2, 4]))
    tp = draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0 and kv % d == 0]))
    pp = draw(st.sampled_from([1, 2, 3]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4]))
    assume(tp * pp * cp * dp <= 32)
    model = ModelSpec(
        name="random", num_layers=pp * vpp * draw(st.integers(1, 2)), hidden_size=h, num_heads=heads,
        num_kv_heads=kv, ffn_hidden_size=h * draw(st.sampled_from([2, 3, 4])), vocab_size=64 * draw(st.integers(1, 4)),
        seq_length=draw(st.sampled_from([16, 32, 64])), num_experts=experts,
        top_k=draw(st.integers(1, experts)), gated_mlp=draw(st.booleans()), linear_bias=draw(st.booleans()),
        norm=draw(st.sampled_from(["rmsnorm", "layernorm"])),
        position_embedding=draw(st.sampled_from(["rope", "learned"])), tied_embeddings=draw(st.booleans()))
    ep = draw(st.sampled_from([d for d in (1, 2, 4) if dp % d == 0 and experts % d == 0])) if experts > 1 else 1
    mb = draw(st.sampled_from([1, 2]))
    m = draw(st.integers(1, 3)) * (pp if vpp > 1 else 1)
    par = ParallelismSpec(
        tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp,
        sequence_parallel=True if (experts > 1 and tp > 1) else draw(st.booleans()),
        zero_stage=draw(st.sampled_from([0, 1, 3])), recompute=draw(st.booleans()), micro_batch_size=mb,
        global_batch_size=m * mb * dp, order="-".join(draw(st.permutations(["tp", "cp", "pp", "dp"]))),
        dp_bucket_bytes=draw(st.sampled_from([1, 10_000, 10**9])))
    return model, par


def _mask(tr, pattern):
    rx = re.compile(pattern)
    return np.array([bool(rx.search(s)) for s in tr.labels], dtype=bool)[tr.label]


@SETTINGS
@given(specs())
def test_random_specs_build_consistent_deadlock_free_traces(spec):
    model, par = spec
    tr = build_trace(model, par, get_hardware("h100"))
    check_trace(tr)  # sends matched, collectives complete, no dependency cycle
    m, t, s, h = par.num_microbatches, par.tp, model.seq_length, model.hidden_size
    ranks_per_stage = par.world_size // par.pp
    layers_local = model.num_layers // par.pp
    comp = tr.kind == OpKind.COMPUTE
    coll = tr.kind == OpKind.COLLECTIVE
    gk = tr.op_group_kind()

    # FLOPs: 3·B·F_seq, plus one forward of the layers per sequence with recomputation
    f_seq = sequence_forward_flops(model)
    extra = par.global_batch_size * (f_seq - 2 * s * h * model.vocab_size) if par.recompute else 0
    assert int(tr.flops[comp].sum()) == 3 * par.global_batch_size * f_seq + extra
    assert np.all(tr.duration_ns[comp & (tr.flops > 0)] > 0)

    # TP bytes inside layers: the same per pass (forward, backward, recompute) and per rank
    passes = 2 + int(par.recompute)
    S = sz.tp_activation_bytes(model, par)
    if model.is_moe:
        per_pass = (2 * S if par.sp else S) + 2 * sz.moe_tp_bytes(model, par)
    else:
        per_pass = 4 * S if par.sp else 2 * S
    layer_tp = coll & (gk == GroupKind.TP) & _mask(tr, r"/L\d+/")
    per_rank = np.bincount(tr.rank[layer_tp], weights=tr.bytes[layer_tp], minlength=tr.n_ranks)
    assert np.all(per_rank == (layers_local * m * passes * per_pass if t > 1 else 0))

    # EP all-to-all: 2 per layer per pass
    a2a = coll & (tr.coll_kind == CollKind.ALL_TO_ALL)
    n_a2a = layers_local * m * passes * 2 if (model.is_moe and par.ep > 1) else 0
    assert np.all(np.bincount(tr.rank[a2a], minlength=tr.n_ranks) == n_a2a)

    # pipeline: every virtual-stage boundary, every micro-batch, both directions
    pp_send = (tr.kind == OpKind.SEND) & _mask(tr, r"pp_send$")
    assert pp_send.sum() == 2 * m * (par.pp * par.vpp - 1) * ranks_per_stage
    assert np.all(tr.bytes[pp_send] == sz.pp_activation_bytes(model, par))

    # context parallel: cp-1 ring sends per layer per pass
    cp_send = (tr.kind == OpKind.SEND) & _mask(tr, r"cp_send")
    assert cp_send.sum() == tr.n_ranks * layers_local * m * passes * (par.cp - 1)

    # data-parallel gradients: Σ over a rank = 4 × the parameters it holds (per micro-batch with ZeRO-3)
    stage_params = [_stage_params(model, par, st_) for st_ in range(par.pp)]
    stage_of = make_layout(par).stage
    stage = tr.spec_dict()["derived"]["params_per_gpu_by_stage"]
    assert stage == [p.total for p in stage_params]
    grad_kind = CollKind.ALL_REDUCE if par.zero_stage == 0 else CollKind.REDUCE_SCATTER
    reps = m if par.zero_stage == 3 else 1
    phase = Phase.BACKWARD if par.zero_stage == 3 else Phase.GRAD_SYNC
    for kind, attr, size in ((GroupKind.DP, "dense", par.dp * par.cp), (GroupKind.EDP, "expert", par.edp)):
        sel = coll & (gk == kind) & (tr.coll_kind == grad_kind) & (tr.phase == phase)
        got = np.bincount(tr.rank[sel], weights=tr.bytes[sel], minlength=tr.n_ranks)
        for r in range(tr.n_ranks):
            want = 4 * reps * getattr(stage_params[stage_of[r]], attr) if size > 1 else 0
            assert got[r] == want

    # the optimizer step follows every gradient collective of its rank
    opt = np.flatnonzero(_mask(tr, r"^opt/step$"))
    assert opt.size == tr.n_ranks
    sync = np.flatnonzero(coll & (tr.phase == Phase.GRAD_SYNC))
    for o in opt:
        mine = sync[tr.rank[sync] == tr.rank[o]]
        assert set(mine.tolist()) <= set(tr.deps(o).tolist())


def _stage_params(model, par, stage):
    """Parameters one rank of pipeline stage ``stage`` holds, summed over its model chunks."""
    layer = sz.layer_unit_params(model, par)
    n = model.num_layers // (par.pp * par.vpp)
    total = sz.UnitParams()
    for c in range(par.vpp):
        vs = c * par.pp + stage
        if vs == 0:
            total = total + sz.embedding_unit_params(model, par)
        total = total + sz.UnitParams(sharded=n * layer.sharded, replicated=n * layer.replicated,
                                      expert=n * layer.expert)
        if vs == par.pp * par.vpp - 1:
            total = total + sz.head_unit_params(model, par)
    return total


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(specs())
def test_random_traces_survive_hdf5_and_chakra_round_trips(tmp_path_factory, spec):
    model, par = spec
    tr = build_trace(model, par, get_hardware("a100"))
    d = tmp_path_factory.mktemp("rt")
    write_trace(d / "t.h5", tr)
    assert read_trace(d / "t.h5").equals(tr)
    write_chakra(tr, d / "et")
    assert read_chakra(d / "et").equals(tr)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(specs())
def test_builds_are_deterministic(spec):
    model, par = spec
    a = build_trace(model, par, get_hardware("h100"))
    b = build_trace(model, par, get_hardware("h100"))
    assert a.equals(b)
