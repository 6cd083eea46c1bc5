"""Several workloads on one fabric: isolation, fair sharing, offered load, placement, and their inputs.

Physics on small fabrics of the real ns-3: two jobs that share no link run exactly as each alone; two
jobs through one bottleneck share it fairly; synthetic background traffic at load ρ loads the links by ρ.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim import engine
from cosim.plan import compile as compile_plan
from cosim.record import describe_job
from cosim.run import experiments_of, run
from cosim.spec import from_document, read_toml, to_document, to_toml

TRANSPORTS = ("roce", "ib")
#: a 1-layer model small enough for a DP-4 job to take a few ms of simulated time
TINY = {"num_layers": 1, "hidden_size": 512, "num_heads": 8, "num_kv_heads": 8, "ffn_hidden_size": 1024,
        "vocab_size": 4096, "seq_length": 512}


def training_job(name: str, dp: int = 4, **fields) -> dict:
    """A [[workloads]] table of a tiny DP training job (two iterations, 1 MiB chunks)."""
    return {"name": name, "kind": "training", "model": "llama2-7b", "model_overrides": TINY,
            "parallelism": {"dp": dp, "micro_batch_size": 1, "global_batch_size": dp}, "iterations": 2,
            "chunk_bytes": "1MiB"} | fields


def experiment(network: dict, workloads: list[dict], **top):
    """The one Experiment of a document with these network fields and workloads."""
    exps = from_document({"network": network, "workloads": workloads, **top})
    assert len(exps) == 1
    return exps[0]


def simulate_with_snapshots(exp, plan, snapshot_ns):
    """The engine output of ``plan``'s whole DAG, every flow's delivered bytes recorded at ``snapshot_ns``."""
    return engine.simulate_dag(plan.fabric, **plan.dag.columns(), seed=exp.seed, attributes=plan.attributes,
                               queue_sample_interval_ns=exp.telemetry.queue_sample_interval_ns,
                               max_sim_time_ns=plan.max_sim_time_ns, snapshot_ns=snapshot_ns)


#: one spine, non-blocking, two NICs per leaf: a 4-rank job on 4 servers spans two leaves
ISOLATED = {"topology": "leaf-spine", "gpus_per_server": 1, "hosts_per_leaf": 2, "spines": 1, "hosts": 8}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_jobs_on_disjoint_leaves_run_exactly_as_each_alone(transport):
    """Two DP-4 jobs packed onto disjoint pairs of leaves behind non-blocking uplinks share no link: every
    op of each starts and finishes at the same picosecond as in a run of that job alone on its hosts."""
    net = ISOLATED | {"transport": transport}
    shared = run(experiment(net, [training_job("a"), training_job("b")]))
    assert shared.summary["status"] == "complete"
    for index, name, hosts in ((0, "a", [0, 1, 2, 3]), (1, "b", [4, 5, 6, 7])):
        assert shared.config["workloads"][index]["hosts"] == hosts  # packed: two whole leaves each
        alone = run(experiment(net, [training_job(name, hosts=hosts)]))
        mine = shared.ops["workload"] == index
        for column, values in alone.ops.items():
            if column != "workload":
                np.testing.assert_array_equal(shared.ops[column][mine], values, err_msg=column)
        # a run of one job keeps its summary keys as they are (no ``<name>_`` prefix: cosim.record)
        assert shared.summary[f"{name}_iteration_time_ns"] == alone.summary["iteration_time_ns"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_jobs_through_one_bottleneck_share_it_fairly(transport):
    """Jobs a (hosts 0, 2) and b (hosts 1, 3) each send 8 MiB from leaf 0 to leaf 1 and back, through leaf
    uplinks at half the host rate: in the second half of the transfer their throughputs over the uplink
    have a Jain index of at least 0.9 and fill it."""
    net = {"topology": "leaf-spine", "transport": transport, "gpus_per_server": 1, "hosts_per_leaf": 2,
           "spines": 1, "hosts": 4, "oversubscription": 2.0}
    exp = experiment(net, [{"name": n, "kind": "flows", "pattern": "permutation", "flow_bytes": "8MiB",
                            "hosts": hosts} for n, hosts in (("a", [0, 2]), ("b", [1, 3]))])
    p = compile_plan(exp)
    out = simulate_with_snapshots(exp, p, [600e3, 1200e3])
    assert out.network.status == "complete" and out.network.sim_time_ns > 1200e3
    job = p.dag.job_of(out.flow_op)
    up = np.isin(p.dag.src_node[out.flow_op], [0, 1])  # the flows over leaf 0's uplink
    moved = np.diff(out.network.delivered_at_bytes, axis=0)[0]
    rate_gbps = np.array([moved[up & (job == j)].sum() for j in (0, 1)]) * 8 / 600e3
    jain = rate_gbps.sum() ** 2 / (2 * (rate_gbps ** 2).sum())
    assert jain >= 0.9, rate_gbps
    assert rate_gbps.sum() > 0.8 * 100, rate_gbps  # the 100 Gbps uplink stays busy


@pytest.mark.parametrize("transport,load", [("roce", 0.2), ("roce", 0.5), ("ib", 0.5)])
def test_background_load_rho_loads_the_links_by_rho(transport, load, tmp_path):
    """Synthetic traffic at offered load ρ among 16 hosts (sizes uniform in 10..100 KB from a CDF file):
    the payload the host links carry in the middle half of the 20 ms arrival window is ρ of their capacity
    within 5 %."""
    cdf = tmp_path / "sizes.cdf"
    cdf.write_text("# size_bytes probability\n10000 0\n100000 1\n")
    window_ns = 20e6
    net = {"topology": "leaf-spine", "transport": transport, "gpus_per_server": 1, "hosts_per_leaf": 4,
           "spines": 1, "hosts": 16, "link_gbps": 25.0}
    exp = experiment(net, [{"name": "bg", "kind": "synthetic", "cdf_file": str(cdf), "load": load,
                            "duration_ns": window_ns, "servers": 16}], seed=3)
    p = compile_plan(exp)
    out = simulate_with_snapshots(exp, p, [window_ns / 4, 3 * window_ns / 4])
    assert out.network.status == "complete"
    moved = np.diff(out.network.delivered_at_bytes, axis=0)[0].sum()
    utilization = moved * 8 / (16 * 25.0 * window_ns / 2)
    assert utilization == pytest.approx(load, rel=0.05)


def test_a_start_offset_delays_a_job_and_alone_gives_its_slowdown():
    """A job starting at 200 us has no op before then and its first iteration is timed from its start; with
    alone = true the summary holds its alone iteration time and shared / alone; PFC protects the jobs'
    priority 0 and the ACKs' 7, not the lossy storage class 1."""
    net = ISOLATED | {"transport": "roce", "hosts": 10}
    exp = experiment(net, [training_job("a", alone=True), training_job("b", start_ns=200e3, alone=True),
                           {"name": "storage", "kind": "storage", "priority": 1, "lossless": False,
                            "request_bytes": "64KiB", "load": 0.2, "duration_ns": 2e6}], seed=2)
    rec = run(exp)
    s = rec.summary
    assert s["status"] == "complete"
    b = rec.ops["workload"] == 1
    assert np.nanmin(rec.ops["start_ns"][b]) >= 200e3
    for n in ("a", "b"):
        assert s[f"{n}_sharing_slowdown"] == pytest.approx(s[f"{n}_iteration_time_ns"]
                                                           / s[f"{n}_alone_iteration_time_ns"])
        assert s[f"{n}_sharing_slowdown"] >= 1.0 - 1e-12
    assert s["storage_flows"] == s["storage_flows_completed"] > 0
    assert rec.config["attributes"]["SharedBufferMmu::LosslessPriorityMask"] == str(1 << 0 | 1 << 7)
    assert set(np.unique(rec.flows["workload"])) == {0, 1, 2}


def test_shipped_two_job_experiments_round_trip_and_show_placement(capsys):
    """two-jobs-packed puts each job under one leaf, two-jobs-spread across the same two leaves; the
    resolved document of each reads back to the same Experiment; --dry-run prints every workload's hosts."""
    for name in ("two-jobs-packed", "two-jobs-spread"):
        exps = experiments_of(name)
        assert [e.network.transport for e in exps] == ["roce", "ib"]
        for exp in exps:
            assert from_document(read_toml_text(to_toml(to_document(exp)))) == [exp]
        plan = compile_plan(exps[0])
        leaves = [describe_job(plan, j)["leaves"] for j in plan.jobs[:2]]
        assert (leaves[0] != leaves[1] and len(leaves[0]) == 1) if name.endswith("packed") else \
            (leaves[0] == leaves[1] and len(leaves[0]) == 2)
    code, out, _ = run_main(["run", "two-jobs-spread", "--dry-run", "--transport", "roce"], capsys)
    assert code == 0
    assert "workload job0: training, 4 ranks; hosts 0-1,4-5 on servers 0,2" in out
    assert "workload ckpt: checkpoint, 32 flows" in out


def read_toml_text(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


#: (what is wrong, workloads, network extras, text the one-line error holds)
BAD_INPUTS = [
    ("unknown kind", [{"kind": "video"}], {}, "workloads.job0.kind: unknown workload kind 'video'"),
    ("two names alike", [training_job("a"), training_job("a")], {}, "two workloads are named 'a'"),
    ("a GPU twice", [training_job("a", hosts=[0, 1, 2, 3]), training_job("b", hosts=[3, 4, 5, 6])], {"hosts": 8},
     "host 3 is already used by workload 'a'"),
    ("too few servers", [training_job("a"), training_job("b")], {"hosts": 6}, "'b' needs 4 servers, 2 of"),
    ("hosts vs ranks", [training_job("a", hosts=[0, 1])], {}, "lists 2 hosts for 4 ranks"),
    ("host beyond fabric", [training_job("a", hosts=[0, 1, 2, 99])], {"hosts": 8}, "host 99 is not a NIC"),
    ("one class, two loss rules", [training_job("a"), {"name": "s", "kind": "storage", "lossless": False}], {},
     "priority 0 is lossless for one workload and lossy for another"),
    ("unknown reference", [training_job("a"), {"name": "ck", "kind": "checkpoint", "writers": ["zz"]}], {},
     "'zz' is not a training or flow workload"),
    ("unknown field", [training_job("a", flow_bytes=5)], {}, "workloads.a.flow_bytes: unknown field"),
    ("reserved name", [training_job("fct")], {}, "would make results keys"),
    ("bad placement", [training_job("a", placement="tight")], {}, "workloads.a.placement: unknown value"),
]


@pytest.mark.parametrize("what,workloads,extra,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_shared_fabrics_are_one_line_errors(what, workloads, extra, message, tmp_path, capsys):
    """Each mistake in [[workloads]] stops `cosim run --dry-run` with exit 2 and one line naming it."""
    path = tmp_path / "bad.toml"
    path.write_text(to_toml({"network": ISOLATED | {"hosts": None} | extra, "workloads": workloads}))
    code, out, err = run_main(["run", str(path), "--dry-run"], capsys)
    assert code == 2, (out, err)
    assert message in err and err.startswith("Error:") and err.count("\n") == 1, err


def test_workload_and_workloads_together_is_an_error():
    """A document gives one [workload] or a list of [[workloads]], never both."""
    from cosim.errors import CosimInputError

    with pytest.raises(CosimInputError, match="not both"):
        from_document({"workload": {"kind": "flows"}, "workloads": [training_job("a")]})


def test_single_workload_documents_are_unchanged():
    """The [workload] form keeps its resolved document (no workloads key) and is not a shared fabric."""
    exp = from_document(read_toml(_shipped("congested-training")))[0]
    assert not exp.is_shared and exp.is_training and "workloads" not in to_document(exp)


def _shipped(name: str):
    from cosim.spec import catalog

    return catalog.path_of(name)
