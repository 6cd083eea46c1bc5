"""``cosim attributes`` and ``cosim list``: what a user can set and name, read from the real engine and the
registries in code, so the listings can never drift from what is accepted."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from conftest import help_output_loading_nothing_heavy, run_main

#: numeric attributes whose values have no unit: a priority class number and a bit mask of priorities
UNITLESS = {"HostNic::ControlPriority", "FabricSwitch::TrimPriority", "SharedBufferMmu::LosslessPriorityMask"}


@pytest.fixture(scope="module")
def listed(engine_ns):
    """(``cosim attributes --json`` rows, engine.list_attributes()), once per module (capsys is per test)."""
    from cosim import engine
    from cosim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        main(["attributes", "--json"])
    assert exc.value.code == 0
    return json.loads(out.getvalue()), engine.list_attributes()


def test_every_engine_attribute_is_listed_with_its_default(listed):
    """Every TypeId and attribute Engine::ListAttributes reports appears once, with the engine's default;
    the readable default (1us, 100Gbps) is the same value when the engine reads it back."""
    rows, infos = listed
    assert [r["name"] for r in rows] == [i.name for i in infos]
    assert {r["type"] for r in rows} == {i.type_name for i in infos}
    assert {"HostNic", "FabricSwitch", "SharedBufferMmu", "EgressPort", "DcqcnRateControl"} <= {r["type"] for r in rows}
    assert [r["ns3_default"] for r in rows] == [i.default for i in infos]
    from cosim import engine
    from cosim.cli.attributes import shown_value

    settable = {r["name"]: r["default"] for r in rows if r["value_type"] != "ns3::PointerValue"}
    read_back = engine.attribute_values(settable, list(settable))  # ns-3 may write "+1e+06ps" for "+1000ns"
    assert {i.name: shown_value(i, read_back[i.name]) for i in infos if i.name in settable} == settable


@pytest.mark.parametrize("name,default,unit,accepted", [
    ("HostNic::MtuBytes", "4096", "bytes", "1..1048576"),
    ("EgressPort::DataRate", "100Gbps", "bit/s", "1Mbps..1000000Gbps"),
    ("TimingWheelScheduler::BucketWidth", "5ns", "time", "0s..100000s"),
    ("HostNic::CnpInterval", "50us", "time", "0s..100000s"),
    ("DeadlockWatchdog::Interval", "1ms", "time", "1ns..100000s"),
    ("FabricNode::InputBufferBytes", "640000", "bytes", ">= 64"),
    ("EgressPort::LinkFlowControl", "pfc", "", "pfc|credit"),
    ("FabricSwitch::EcnPmax", "0.2", "dimensionless", "0..1"),
    ("FabricSwitch::PauseQuanta", "65535", "quanta of 512 bit times", "2..65535"),
    ("HostNic::Dcqcn", "0", "", "a model object: set DcqcnRateControl::* attributes instead"),
])
def test_units_and_ranges_come_from_value_type_name_and_help(listed, name, default, unit, accepted):
    """A time shows as ns-3 writes it back in its largest whole unit, a rate in bit/s, a ...Bytes in bytes;
    the accepted range is the checker's (with the engine's bounds on times and rates)."""
    row = {r["name"]: r for r in listed[0]}[name]
    assert (row["default"], row["unit"], row["accepted"]) == (default, unit, accepted)


def test_every_printed_range_bound_is_accepted_by_set(listed):
    """Both ends of every range the listing prints ("lo..hi", ">= lo") are values --set accepts: the engine
    takes each one (no Tbps, which ns-3 cannot read, and no negative time, which the engine refuses)."""
    from cosim import engine

    bounds = {}
    for r in listed[0]:
        lo, sep, hi = r["accepted"].partition("..")
        if sep and r["value_type"] != "ns3::StringValue":
            bounds[r["name"]] = (lo, hi)
        elif r["accepted"].startswith(">= "):
            bounds[r["name"]] = (r["accepted"][3:],)
    assert len(bounds) > 40
    for name, ends in bounds.items():
        for end in ends:
            assert engine.attribute_values({name: end}, [name]), (name, end)


def test_run_defaults_are_shown_beside_the_static_ones(listed, engine_ns, capsys):
    """BufferBytes shows the buffer a run gives each switch class (the one cosim.network.buffers picks), and
    transport-set attributes show their InfiniBand value."""
    import numpy as np

    from cosim.network.buffers import class_buffer_bytes

    code, out, _ = run_main(["attributes", "BufferBytes"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "In a run: each switch by its class" in text
    leaf_25t = int(class_buffer_bytes(np.array([25.6e12]))[0])
    assert f"{leaf_25t >> 20} MiB ({leaf_25t}) up to 25.6 Tbit/s" in text and "FabricNode::InputBufferBytes" in text
    rows = {r["name"]: r for r in listed[0]}
    assert rows["HostNic::HeaderBytes"]["run_default"] == "ib: 26, uec: 122"
    assert rows["FabricSwitch::EcnEnabled"]["run_default"] == "ib: false, ib with --ib-cc: true"
    assert rows["HostNic::MtuBytes"]["run_default"] is None


@pytest.mark.parametrize("transport,absent,present", [("ib", "dcqcn =", "ib_cc = false"),
                                                       ("roce", "ib_cc =", "dcqcn = true")])
def test_a_resolved_experiment_prints_only_its_transports_switches(capsys, transport, absent, present):
    """--dry-run's resolved document of an InfiniBand run has no dcqcn (nor a RoCE run an ib_cc), and reading
    it back gives the same experiment."""
    import tomllib

    from cosim.spec import from_document, make, to_document, to_toml

    code, out, err = run_main(["run", "--transport", transport, "--dry-run"], capsys)
    assert code == 0, err
    assert absent not in out and present in out
    exp = make("flows", transport=transport, dcqcn=False, ib_cc=True)
    assert from_document(to_document(exp)) == [exp]
    assert from_document(tomllib.loads(to_toml(to_document(exp)))) == [exp]


def test_every_numeric_attribute_states_its_unit(listed):
    """Sizes, times, rates, counts and ratios all carry a unit (from the value type, the name or the help);
    only a priority number and a priority bit mask have none."""
    numeric = ("ns3::UintegerValue", "ns3::IntegerValue", "ns3::DoubleValue", "ns3::TimeValue",
               "ns3::DataRateValue")
    missing = {r["name"] for r in listed[0] if r["value_type"] in numeric and not r["unit"]}
    assert missing == UNITLESS


def test_attributes_a_run_sets_name_the_option_to_use(listed):
    """Every attribute a run sets itself is a real attribute and is marked with the option that owns it."""
    from cosim.network.transport import RUN_SET_ATTRIBUTES

    marked = {r["name"]: r["set_by_run"] for r in listed[0] if r["set_by_run"]}
    assert marked == RUN_SET_ATTRIBUTES
    assert "--link-gbps" in marked["EgressPort::DataRate"]


@pytest.mark.parametrize("which,names", [
    ("HostNic::MtuBytes", ["HostNic::MtuBytes"]),
    ("hostnic::mtubytes", ["HostNic::MtuBytes"]),
    ("MtuBytes", ["HostNic::MtuBytes"]),
    ("EgressQueueSampler", ["EgressQueueSampler::Interval"]),
])
def test_a_filter_selects_a_model_or_an_attribute(which, names, engine_ns, capsys):
    """TYPE picks one model, one Type::Attribute or an attribute name, case-insensitive."""
    code, out, _ = run_main(["attributes", which, "--json"], capsys)
    assert code == 0 and [r["name"] for r in json.loads(out)] == names


def test_a_model_is_listed_with_defaults_units_and_help(listed, engine_ns, capsys):
    """The text form groups by model: a header with the count, one line per attribute with its default and
    unit, the help beneath."""
    code, out, _ = run_main(["attributes", "HostNic"], capsys)
    n = sum(r["type"] == "HostNic" for r in listed[0])
    assert code == 0 and out.startswith(f"HostNic ({n} attributes)\n")
    assert "  MtuBytes = 4096  [bytes, 1..1048576]\n" in out
    assert "Payload bytes carried by a full data packet" in out


@pytest.mark.parametrize("which,says", [
    ("HostNik", "close matches: HostNic"),
    ("EcnKmin", "close matches: FabricSwitch::EcnKminBytes"),
    ("Qqqqq", "models: DagExecutor, DcqcnRateControl"),
])
def test_an_unknown_type_is_one_line_with_close_matches(which, says, engine_ns, capsys):
    """A name that matches nothing exits 2 with one Error line naming close matches (or the models)."""
    code, out, err = run_main(["attributes", which], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("Error: ") and says in err, err


def _registries() -> dict[str, list[str]]:
    from cosim.collectives.lower import ALGORITHM_NAMES
    from cosim.faults import kind_names
    from cosim.network.fabrics import TOPOLOGIES
    from cosim.network.transport import TRANSPORTS
    from cosim.spec import PATTERNS, catalog
    from cosim.workload import hardware, model

    return {"experiments": catalog.names(), "models": list(model.PRESETS), "gpus": hardware.preset_names(),
            "topologies": list(TOPOLOGIES), "transports": list(TRANSPORTS), "algorithms": list(ALGORITHM_NAMES),
            "patterns": list(PATTERNS), "faults": list(kind_names())}


def test_list_names_exactly_what_the_registries_accept(capsys):
    """Every section of ``cosim list`` holds the names of its registry, in order, each with a description."""
    code, out, _ = run_main(["list", "--json"], capsys)
    listed = json.loads(out)
    assert code == 0 and {s: [r["name"] for r in rows] for s, rows in listed.items()} == _registries()
    assert all(r["description"] for rows in listed.values() for r in rows), listed


def test_list_sections_filter_and_run_list_agree(capsys):
    """``cosim list topologies patterns`` prints only those sections; ``cosim run --list`` shows the same
    experiments as ``cosim list experiments``."""
    code, out, _ = run_main(["list", "topologies", "patterns"], capsys)
    assert code == 0 and out.startswith("topologies:") and "\n\nflow traffic patterns:" in out
    assert "experiments" not in out and "fat-tree" in out and "permutation" in out
    code, out, _ = run_main(["run", "--list"], capsys)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == _registries()["experiments"]


def test_list_refuses_an_unknown_section(capsys):
    """An unknown section is a usage error (exit 2, one line naming the sections)."""
    code, _, err = run_main(["list", "switches"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "topologies" in err


def test_help_of_both_verbs_loads_nothing_heavy():
    """``cosim attributes --help`` and ``cosim list --help`` stay instant: no numpy, h5py or cppyy."""
    text = help_output_loading_nothing_heavy([["attributes"], ["list"]])
    assert "cosim attributes HostNic::MtuBytes" in text and "cosim list topologies" in text


def test_an_inherited_attribute_set_on_a_subtype_names_its_declaring_type(engine_ns, capsys):
    """ns-3 keeps an attribute's default on the type that declares it: --set on a subtype is one line
    naming the type to set (FabricNode::InputBufferBytes sizes switches' and NICs' input buffers alike)."""
    code, _, err = run_main(["run", "--pattern", "incast", "--hosts", "4", "--dry-run", "--set",
                             "FabricSwitch::InputBufferBytes=100000"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "is inherited: set FabricNode::InputBufferBytes" in err
