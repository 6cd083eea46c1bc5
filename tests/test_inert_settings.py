"""Settings that cannot act on a run's transport are said, not passed silently: cosim run warns naming the
attribute, the transport and the attribute that acts; a sweep over values that act on none of its points
is refused. The rule table (cosim.network.transport.inert_attributes) is checked against the simulator:
what it calls inert leaves the run bit for bit unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_main

from cosim.network.transport import inert_attributes
from cosim.run import run
from cosim.spec import make

#: a congested incast: 4 senders of 256 KiB into one host, so buffers, pauses, credits and marks all matter
INCAST = {"pattern": "incast", "hosts": 5, "flow_bytes": "256KiB"}


def _finish_ns(transport: str, attributes: dict, **fields) -> np.ndarray:
    record = run(make("flows", transport=transport, **INCAST, **fields,
                      **{f"attributes.{k}": x for k, x in attributes.items()}))
    assert record.summary["status"] == "complete"
    return np.asarray(record.flows["finish_ns"])


@pytest.mark.parametrize("transport,name,value,fields", [
    ("ib", "SharedBufferMmu::BufferBytes", "300000", {}),
    ("ib", "SharedBufferMmu::DynamicThresholdAlpha", "0.01", {}),
    ("ib", "FabricSwitch::HeadroomBytes", "200000", {}),
    ("ib", "DcqcnRateControl::RateAI", "1Mbps", {}),
    ("ib", "FabricSwitch::EcnKminBytes", "5000", {}),
    ("ib", "HostNic::CctiTimer", "100ns", {}),
    ("roce", "FabricNode::InputBufferBytes", "8192", {}),
    ("roce", "EgressPort::DataVls", "1", {}),
    ("roce", "HostNic::CctGapStep", "5us", {}),
    ("roce", "DcqcnRateControl::G", "0.5", {"dcqcn": False}),
])
def test_what_the_rules_call_inert_changes_nothing(engine_ns, transport, name, value, fields):
    """Each attribute the rules call inert on a transport is named by them, and setting it to a value far
    from its default gives the same flow completion times, bit for bit."""
    dcqcn = fields.get("dcqcn", True)
    assert [n for n, _ in inert_attributes(transport, {name: value}, dcqcn=dcqcn)] == [name]
    assert np.array_equal(_finish_ns(transport, {name: value}, **fields), _finish_ns(transport, {}, **fields))


@pytest.mark.parametrize("transport,name,value", [
    ("roce", "SharedBufferMmu::BufferBytes", "1000000"),
    ("ib", "FabricNode::InputBufferBytes", "260000"),
])
def test_what_acts_is_not_called_inert_and_does_act(engine_ns, transport, name, value):
    """The knob the warning points to is not inert on its transport, and it moves the run."""
    assert inert_attributes(transport, {name: value}) == []
    assert not np.array_equal(_finish_ns(transport, {name: value}), _finish_ns(transport, {}))


def test_run_warns_once_naming_attribute_transport_and_what_acts(tmp_path, capsys, engine_ns):
    """cosim run --transport ib --set SharedBufferMmu::BufferBytes: one stderr line, the run still runs;
    the same setting on both transports (it acts on RoCE) warns nothing."""
    args = ["run", "--pattern", "incast", "--hosts", "4", "--flow-bytes", "64KiB", "-q"]
    code, _, err = run_main([*args, "--transport", "ib", "--set", "SharedBufferMmu::BufferBytes=4000000",
                             "-o", str(tmp_path / "ib.h5")], capsys)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: SharedBufferMmu::BufferBytes"), err
    assert "transport ib" in lines[0] and "FabricNode::InputBufferBytes" in lines[0]
    code, _, err = run_main([*args, "--transport", "both", "--set", "SharedBufferMmu::BufferBytes=4000000",
                             "--dry-run"], capsys)
    assert code == 0 and "Warning" not in err, err


def test_sweep_over_an_inert_attribute_is_refused_and_a_mixed_one_warned(tmp_path, capsys):
    """A grid over SharedBufferMmu::BufferBytes on IB alone would be identical runs: refused, one line,
    nothing written. Crossed with transport = [roce, ib], it acts on the RoCE points: a warning."""
    ib_only = tmp_path / "ib.toml"
    ib_only.write_text('[base]\ntransport = "ib"\nhosts = 4\n[grid]\n'
                       'attributes."SharedBufferMmu::BufferBytes" = [4000000, 8000000]\n')
    code, _, err = run_main(["sweep", str(ib_only), "-o", str(tmp_path / "out")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "SharedBufferMmu::BufferBytes" in err and "identical runs" in err and "FabricNode::InputBufferBytes" in err
    assert not (tmp_path / "out").exists()
    mixed = tmp_path / "mixed.toml"
    mixed.write_text('[base]\nhosts = 4\n[grid]\ntransport = ["roce", "ib"]\n'
                     'attributes."SharedBufferMmu::BufferBytes" = [4000000, 8000000]\n')
    code, out, err = run_main(["sweep", str(mixed), "-o", str(tmp_path / "out"), "--dry-run"], capsys)
    assert code == 0 and "2 of 4 points" in err and err.startswith("Warning: SharedBufferMmu::BufferBytes"), err


@pytest.mark.parametrize("transport,attributes,switches,inert", [
    ("ib", {"DcqcnRateControl::G": "0.1", "HostNic::DcqcnEnabled": "true", "FabricSwitch::EcnEnabled": "true"}, {},
     []),
    ("ib", {"DcqcnRateControl::G": "0.1", "HostNic::DcqcnEnabled": "true"}, {}, ["DcqcnRateControl::G"]),
    ("ib", {"FabricSwitch::EcnKminBytes": "1000", "HostNic::CctiTimer": "1us"}, {"ib_cc": True}, []),
    ("roce", {"HostNic::CctiTimer": "1us", "HostNic::IbCcEnabled": "true"}, {}, []),
    ("roce", {"DcqcnRateControl::G": "0.1", "HostNic::DcqcnEnabled": "true"}, {"dcqcn": False}, []),
    ("roce", {"FabricSwitch::EcnKminBytes": "1000"}, {"dcqcn": False}, []),  # marks are still counted
    ("roce", {"HostNic::MtuBytes": "1024", "FabricSwitch::Routing": "spray"}, {}, []),
])
def test_a_mechanism_switched_on_explicitly_makes_its_knobs_act(transport, attributes, switches, inert):
    """An explicit HostNic::DcqcnEnabled / IbCcEnabled / FabricSwitch::EcnEnabled = true counts as the
    mechanism on; attributes of both transports are never called inert."""
    assert [n for n, _ in inert_attributes(transport, attributes, **switches)] == inert
