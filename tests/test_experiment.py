"""The Experiment: one spec for every run, from TOML, flags, sweeps and Python, stored with its results."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main

from cosim.errors import CosimInputError
from cosim.plan import compile as compile_plan
from cosim.plan.describe import describe
from cosim.run import experiments_of, run
from cosim.spec import (
    catalog,
    from_document,
    make,
    read_toml,
    to_document,
    to_toml,
    with_overrides,
)
from cosim.sweep.spec import load_sweep

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
from cases import snapshot  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DP8 = REPO / "traces" / "llama2-7b-2l_dp8-zero1.h5"


@pytest.mark.parametrize("exp", [
    make("flows", hosts=4, flow_bytes="200KB", transport="ib", **{"attributes.HostNic::MtuBytes": 1024}),
    make("flows", topology="leaf-spine", hosts=8, oversubscription=2.0, dcqcn=False, seed=7, name="ls"),
    make("training", trace=str(DP8), iterations=2, chunk_bytes="1MiB", algorithm="ring", gpus_per_server=4),
    catalog_exp := from_document(read_toml(catalog.path_of("builtin")))[1],
])
def test_toml_round_trip_is_exact(exp, tmp_path):
    """Experiment → resolved document → TOML → Experiment gives the same Experiment, field for field."""
    path = tmp_path / "e.toml"
    path.write_text(to_toml(to_document(exp)))
    again = from_document(read_toml(path))
    assert again == [exp]


def test_toml_leaves_out_none_and_refuses_what_toml_cannot_hold():
    """None values and empty sub-tables are left out (TOML has no null); a numpy integer is an input error."""
    doc = {"name": "x", "seed": None, "network": {"hosts": None, "attributes": {}, "link_gbps": 100.0},
           "faults": [{"kind": "link_down", "element": "leaf0", "at_ns": 0.0, "duration_ns": None}]}
    text = to_toml(doc)
    assert "seed" not in text and "hosts" not in text and "attributes" not in text and "duration_ns" not in text
    assert tomllib.loads(text) == {"name": "x", "network": {"link_gbps": 100.0},
                                    "faults": [{"kind": "link_down", "element": "leaf0", "at_ns": 0.0}]}
    with pytest.raises(CosimInputError, match="cannot write it to TOML"):
        to_toml({"seed": np.int64(3)})


@pytest.mark.parametrize("name", catalog.names())
def test_every_shipped_experiment_validates_and_plans(name):
    """Each TOML in ns3_scenarios/experiments/ builds Experiments whose fabric and attributes can start."""
    assert name in ("builtin", "incast", "permutation", "congested-training") or name
    exps = experiments_of(name)
    assert {e.network.transport for e in exps} >= {"roce", "ib"}  # as "both", "all" or as variants
    for exp in exps:
        plan = describe(compile_plan(exp))
        assert plan["hosts"] >= 2 and plan["flows"] > 0 and plan["data_packet_hops_estimate"] > 0


def test_list_shows_every_shipped_experiment(capsys):
    """cosim run --list names the shipped experiments with their descriptions."""
    code, out, _ = run_main(["run", "--list"], capsys)
    assert code == 0 and all(n in out for n in catalog.names())


def test_dry_run_prints_the_resolved_experiment_and_writes_nothing(tmp_path, capsys):
    """--dry-run shows servers, switches, oversubscription, buffers and the estimate, and runs nothing."""
    out_file = tmp_path / "r.h5"
    code, out, _ = run_main(["run", "builtin", "--dry-run", "-o", str(out_file)], capsys)
    assert code == 0 and not out_file.exists()
    for needle in ("[network]", 'transport = "roce"', 'transport = "ib"', "servers: 4", "switches: 4",
                   "oversubscription: 2.0", "leaves: 2", "spines: 2", "buffer_bytes_per_switch", "headroom_bytes_per_switch_max",
                   "ranks: 16", "data_packet_hops_estimate", "input_buffer_bytes_per_port"):
        assert needle in out, needle


def test_inspect_config_then_run_reproduces_the_run_bit_for_bit(tmp_path, capsys):
    """cosim inspect --config r.h5 > e.toml; cosim run e.toml: identical datasets and summary."""
    first, again, toml = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "e.toml"
    code, _, err = run_main(["run", "--trace", str(DP8), "--gpus-per-server", "4", "--transport", "ib",
                             "--set", "FabricNode::InputBufferBytes=320000", "-q", "-o", str(first)], capsys)
    assert code == 0, err
    code, text, err = run_main(["inspect", str(first), "--config"], capsys)
    assert code == 0, err
    toml.write_text(text)
    code, _, err = run_main(["run", str(toml), "-q", "-o", str(again)], capsys)
    assert code == 0, err
    a, b = snapshot(first), snapshot(again)
    assert list(a) == list(b) == ["ib"]
    assert a["ib"]["summary"] == b["ib"]["summary"]
    for key, data in a["ib"]["datasets"].items():
        assert np.array_equal(data, b["ib"]["datasets"][key], equal_nan=data.dtype.kind == "f"), key


def test_cli_flags_override_file_fields(tmp_path):
    """Options given on the command line win over the experiment file; the rest comes from the file."""
    exps = experiments_of("incast", {"network.transport": "ib", "hosts": 4, "attributes.X::Y": "1"})
    (exp,) = exps
    assert (exp.name, exp.network.transport, exp.network.hosts, exp.workload.flow_bytes) == ("incast", "ib", 4, 1 << 20)
    assert dict(exp.network.attributes) == {"X::Y": "1"}


@pytest.mark.parametrize("overrides,field", [
    ({"network.link_gbps": 0}, "network.link_gbps"),
    ({"network.link_gbps": 1e12}, "network.link_gbps"),
    ({"hosts": 1}, "network.hosts"),
    ({"seed": -1}, "seed"),
    ({"seed": 2**64}, "seed"),
    ({"workload.flow_bytes": "lots"}, "workload.flow_bytes"),
    ({"telemetry.queue_sample_interval_ns": float("inf")}, "telemetry.queue_sample_interval_ns"),
    ({"network.link_gbps": 10**400}, "network.link_gbps"),  # a TOML integer no float holds
    ({"workload.flow_bytes": 10**400}, "workload.flow_bytes"),
    ({"workload.kind": "inference", "workload.rate_per_s": 1e-9}, "workload.rate_per_s"),  # beyond the clock
    ({"network.transport": "tcp"}, "network.transport"),
    ({"network.topology": "torus"}, "network.topology"),
    ({"network.colour": 1}, "network.colour"),
    ({"workload.iterations": 2}, "workload.iterations"),
    ({"name": "a/b"}, "name"),
])
def test_bad_fields_name_the_field(overrides, field):
    """One validation layer: every bad value is a CosimInputError naming its dotted field."""
    with pytest.raises(CosimInputError) as exc:
        from_document(with_overrides({"workload": {"kind": "flows"}}, overrides))
    assert exc.value.field.endswith(field), str(exc.value)


def test_sweep_over_training_fields(tmp_path, capsys):
    """A sweep over workload.iterations and the transport of a training experiment: each point is a real
    co-simulation with the values of its grid."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'[sweep]\nname = "it"\n[base]\ntrace = "{DP8}"\ngpus_per_server = 4\n'
                     '[grid]\ntransport = ["roce", "ib"]\n"workload.iterations" = [1, 2]\n')
    points = load_sweep(sweep).points
    assert [(p.experiment().network.transport, p.experiment().workload.iterations) for p in points] == [
        ("roce", 1), ("roce", 2), ("ib", 1), ("ib", 2)]
    code, _, err = run_main(["sweep", str(sweep), "-o", str(tmp_path / "out"), "-q"], capsys)
    assert code == 0, err
    code, _, err = run_main(["merge", str(tmp_path / "out"), "-o", str(tmp_path / "m.h5")], capsys)
    assert code == 0, err
    from cosim.results import read_results

    runs = read_results(tmp_path / "m.h5")
    assert [r.summary["iterations"] for r in runs.values()] == [1, 2, 1, 2]
    assert [r.config["experiment"]["network"]["transport"] for r in runs.values()] == ["roce", "roce", "ib", "ib"]
    assert all(r.summary["status"] == "complete" for r in runs.values())


@pytest.mark.parametrize("fields", [
    {"topology": "leaf-spine", "hosts": 8, "oversubscription": 2.0, "link_delay_ns": 3000.0},
    {"hosts": 4, "link_gbps": 400.0, "attributes.SharedBufferMmu::LosslessPriorityMask": "3"},
    {"hosts": 4, "attributes.FabricSwitch::HeadroomBytes": "40000"},
])
def test_dry_run_headroom_is_what_the_switches_configure(fields):
    """The PFC headroom --dry-run reports per switch port equals the smallest one the C++ switches set up
    (the min_headroom_bytes counter of a real run)."""
    exp = make("flows", flow_bytes=10_000, **fields)
    plan = describe(compile_plan(exp))
    assert plan["headroom_bytes_per_port_min"] == run(exp).summary["min_headroom_bytes"]
    assert 0 < plan["shared_pool_bytes_per_switch_min"] < plan["buffer_bytes_per_switch"]


def test_a_trace_file_carries_its_gpu_and_the_resolved_experiment_names_none_other(tmp_path):
    """A run of a trace file resolves no GPU of its own (the trace says which GPU it was generated for, an
    A100 trace is never shown as h100); giving one beside the file is an input error naming the field."""
    from cosim.workload.builder import build_trace
    from cosim.workload.hardware import get_hardware
    from cosim.workload.model import get_model
    from cosim.workload.parallelism import ParallelismSpec
    from cosim.workload.trace import write_trace

    path = tmp_path / "a100.h5"
    write_trace(path, build_trace(get_model("llama2-7b", num_layers=1), ParallelismSpec(dp=2, global_batch_size=2),
                            get_hardware("a100", gpus_per_host=1)))
    exp = make("training", trace=str(path), gpus_per_server=1)
    assert exp.workload.gpu is None
    assert not [line for line in to_toml(to_document(exp)).splitlines() if line.startswith("gpu ")]
    with pytest.raises(CosimInputError) as exc:
        make("training", trace=str(path), **{"workload.gpu": "h100"})
    assert exc.value.field == "workload.gpu"
    generated = make("training", **{"workload.model": "llama2-7b"}).workload.generate_trace(8)
    assert generated.spec_dict()["hardware"]["name"] == "h100"
