"""The plugin builds, loads fast and cleanly, and simulates links with exact physics."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from cosim import engine, plugin
from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.workload import flows as fl

HEADER_BYTES = 82  # HostNic::HeaderBytes default: RoCEv2 headers + preamble + IFG
MTU_BYTES = 4096  # HostNic::MtuBytes default


def wire_bytes(size_bytes: int, mtu: int = MTU_BYTES, header: int = HEADER_BYTES) -> np.ndarray:
    full, rest = divmod(size_bytes, mtu)
    return np.array([mtu] * full + ([rest] if rest else []), dtype=np.int64) + header


def ser_ns(nbytes, gbps: float):
    return np.ceil(np.asarray(nbytes) * 8 * 1e3 / gbps) / 1e3  # ps-exact, rounded up like the model


def test_plugin_loads_from_any_directory_without_warnings(tmp_path):
    code = ("import sys; from cosim import engine; ns = engine.load(); "
            "print(engine.ns3_version()); assert 'ns' not in sys.modules and 'ns3.ns' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3.44"
    assert out.stderr == ""


def test_missing_plugin_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(plugin, "_candidate_lib_dirs", lambda: [tmp_path / "lib"])
    with pytest.raises(plugin.PluginNotFoundError, match="libcosim-ns3 is not built.*pip install"):
        plugin.find_plugin()


def test_standard_headers_are_precompiled_once_in_the_user_cache_when_cppyy_cannot_hold_them(tmp_path):
    cppyy_dir, etc, cache = tmp_path / "cppyy", tmp_path / "etc", tmp_path / "cache"
    cppyy_dir.mkdir()
    etc.mkdir()

    def where(environ=(), etc_writable=False):
        return plugin.standard_pch(dict(environ), cppyy_dir, etc, etc_writable, "6.32.8", cache)

    assert where() == cache / "cosim" / "cling" / "allDict.cxx.pch.6.32.8"  # read-only install without one
    assert where(etc_writable=True) is None  # cppyy_backend builds it in its etc, once
    assert where({"CLING_STANDARD_PCH": "none"}) is None  # the user's choice stands
    (etc / "allDict.cxx.pch.native.2a.6.32.8").touch()
    assert where() is None  # a packager's
    (etc / "allDict.cxx.pch.native.2a.6.32.8").unlink()
    (cppyy_dir / "allDict.cxx.pch.6.32.8").touch()
    assert where() is None  # built by pip install cppyy: what this machine uses


@pytest.mark.parametrize("size_bytes", [1, 4096, 1_000_000, 3 * 4096 + 17])
@pytest.mark.parametrize("gbps", [100.0, 400.0, 25.0, 7.0])
def test_one_hop_flow_time_is_serialization_plus_propagation(engine_ns, size_bytes, gbps):
    delay_ns = 1500.0
    fabric = topology.point_to_point(link_gbps=gbps, link_delay_ns=delay_ns)
    out = engine.simulate(fabric, fl.FlowSet.from_arrays([0], [1], size_bytes))
    expected_ns = ser_ns(wire_bytes(size_bytes), gbps).sum() + delay_ns
    assert out.status == "complete"
    assert out.finish_ns[0] == pytest.approx(expected_ns, rel=1e-3)
    assert abs(out.finish_ns[0] - expected_ns) <= 1e-3 * len(wire_bytes(size_bytes))  # ps rounding only


def test_store_and_forward_through_a_switch(engine_ns):
    size, gbps, delay_ns = 100_000, 100.0, 1000.0
    fabric = topology.single_switch(hosts=2, link_gbps=gbps, link_delay_ns=delay_ns)
    out = engine.simulate(fabric, fl.FlowSet.from_arrays([0], [1], size))
    pkts = wire_bytes(size)
    # Store-and-forward at equal rates: the switch starts forwarding once the first packet is whole, then
    # its egress stays busy back to back (packets arrive exactly as fast as it sends them).
    expected = ser_ns(pkts[0], gbps) + ser_ns(pkts, gbps).sum() + 2 * delay_ns
    assert out.finish_ns[0] == pytest.approx(expected, rel=1e-6)
    acks = -(-size // (64 * 1024))  # one coalesced ACK per 64 KiB (HostNic::AckIntervalBytes) and the last
    # The run ends at the last byte: the final ACK has started its first hop, not its second.
    assert out.packet_hops == 2 * len(pkts) + 2 * acks - 1


def test_incast_conserves_bytes_and_drains_at_line_rate(engine_ns):
    n_hosts, size, gbps = 8, 500_000, 100.0
    fabric = topology.single_switch(hosts=n_hosts, link_gbps=gbps, link_delay_ns=500.0)
    flows = fl.incast(fabric.host_ids, size_bytes=size)
    out = engine.simulate(fabric, flows, queue_sample_interval_ns=500.0)
    assert out.status == "complete"
    np.testing.assert_array_equal(out.delivered_bytes, flows.size_bytes)
    ports = out.ports
    wire_per_flow = wire_bytes(size).sum()
    senders = (ports["node"] < n_hosts) & (ports["node"] != 0)
    np.testing.assert_array_equal(ports["tx_bytes"][senders], wire_per_flow)
    to_receiver = (ports["node"] == n_hosts) & (ports["peer"] == 0)
    assert ports["tx_bytes"][to_receiver].sum() == wire_per_flow * (n_hosts - 1)  # switch in == out
    assert ports["drops"].sum() == 0
    # The bottleneck link is busy from the first arrival to the end: all bytes at line rate.
    last = np.nanmax(out.finish_ns)
    bottleneck_ns = ser_ns(wire_bytes(size), gbps).sum() * (n_hosts - 1)
    assert last == pytest.approx(bottleneck_ns + 2 * 500.0 + ser_ns(MTU_BYTES + HEADER_BYTES, gbps), rel=1e-3)
    # Queue samples: the receiver's egress queue rose and drained back to zero.
    q = out.queues["bytes"][(out.queues["node"] == n_hosts)]
    assert q.max() > 0 and q[-1] == 0
    assert q.max() <= ports["peak_queue_bytes"].max()
    assert np.all(np.diff(out.queues["time_ns"]) >= 0)
    assert out.pool_packets < 10_000  # packets recycled, not one allocation per packet


def test_same_seed_same_results_bit_for_bit(engine_ns):
    fabric = topology.single_switch(hosts=6, link_gbps=100.0, link_delay_ns=300.0)
    flows = fl.permutation(fabric.host_ids, size_bytes=200_000)
    a = engine.simulate(fabric, flows, seed=7)
    b = engine.simulate(fabric, flows, seed=7)
    assert a.finish_ns.tobytes() == b.finish_ns.tobytes()
    assert a.queues["bytes"].tobytes() == b.queues["bytes"].tobytes()
    assert a.events == b.events


def test_attributes_apply_and_do_not_leak_between_runs(engine_ns):
    fabric = topology.point_to_point(link_gbps=100.0, link_delay_ns=0.0)
    flows = fl.FlowSet.from_arrays([0], [1], 8192)
    small = engine.simulate(fabric, flows, attributes={"HostNic::MtuBytes": "1024"})
    assert small.packet_hops == 8 + 1  # data packets + the final ACK
    default = engine.simulate(fabric, flows)
    assert default.packet_hops == 2 + 1


@pytest.mark.parametrize("name,value,match", [
    ("Foo::Bar", "1", "no such ns-3 attribute"),
    ("HostNic::MtuBytes", "abc", "not a valid ns3::UintegerValue"),
    ("EgressPort::DataRate", "fast", "not a valid ns3::DataRateValue"),
    ("HostNic::MtuBytes", "0", "HostNic::MtuBytes"),
])
def test_bad_attributes_are_input_errors(engine_ns, name, value, match):
    fabric = topology.point_to_point(link_gbps=100.0, link_delay_ns=0.0)
    with pytest.raises(CosimInputError, match=match):
        engine.simulate(fabric, fl.FlowSet.from_arrays([0], [1], 100), attributes={name: value})


def test_flows_must_join_hosts(engine_ns):
    fabric = topology.single_switch(hosts=2, link_gbps=100.0, link_delay_ns=0.0)
    with pytest.raises(CosimInputError, match="flows.dst"):
        engine.simulate(fabric, fl.FlowSet.from_arrays([0], [2], 100))  # node 2 is the switch


def test_empty_flow_completes_at_its_start(engine_ns):
    fabric = topology.point_to_point(link_gbps=100.0, link_delay_ns=10.0)
    out = engine.simulate(fabric, fl.FlowSet.from_arrays([0, 0], [1, 1], [0, 4096], start_ns=[250.0, 0.0]))
    assert out.finish_ns[0] == 250.0
    assert out.status == "complete"


#: counters read from the fault model (LinkFaultModel): reported only by runs whose faults acted
FAULT_MODEL_COUNTERS = {"fault_drops", "ber_drops", "link_retransmissions", "llr_retries", "llr_replayed_frames",
                        "reroutes"}
#: counters read from the fast-forward controller: reported only by runs that fast-forward
FAST_FORWARD_COUNTERS = {"fast_forward_spans", "fast_forward_spans_cut", "fast_forward_flow_time_ps",
                         "fast_forward_credited_bytes", "fast_forward_skipped_packet_hops",
                         "fast_forward_flows_uncredited", "fast_forward_checks"}
#: counters read from the exchange between partitions: reported only by partitioned runs (limits.partitions)
PARTITION_COUNTERS = {"partition_windows", "partition_exchanged_packets"}


def test_every_declared_counter_is_reported_with_its_rule(engine_ns):
    """Engine::ListCounters declares each counter once, with a combine rule and a unit; a run without faults
    reports every counter but the fault model's, the fast-forward controller's and the partitions', in
    declaration order, and
    GetCounter refuses other names."""
    infos = engine.counter_infos()
    names = [c.name for c in infos]
    assert len(set(names)) == len(names) and FAULT_MODEL_COUNTERS <= set(names)
    assert all(c.combine in ("sum", "max", "min") and c.unit and c.description for c in infos)
    fabric = topology.single_switch(hosts=4, link_gbps=100.0, link_delay_ns=100.0)
    out = engine.simulate(fabric, fl.incast(fabric.host_ids, size_bytes=100_000))
    assert FAST_FORWARD_COUNTERS | PARTITION_COUNTERS <= set(names)
    skipped = FAULT_MODEL_COUNTERS | FAST_FORWARD_COUNTERS | PARTITION_COUNTERS
    assert list(out.counters) == [n for n in names if n not in skipped]
    assert out.counters["acks"] > 0 and out.counters["min_headroom_bytes"] > 0
    eng = engine.load().Engine(1)
    try:
        with pytest.raises(Exception, match="unknown counter no_such_counter"):
            eng.GetCounter("no_such_counter")
        with pytest.raises(Exception, match="no event log no_such_log"):
            eng.NumLogRows("no_such_log")
    finally:
        eng.__destruct__()


def test_every_event_log_is_read_and_stored_as_its_table(engine_ns):
    """Each log Engine::ListEventLogs declares comes back from a run with its columns in declared order and
    types (times in ns as float64, rows in time order), and is the results table of its name: every column
    a schema dataset with the declared unit."""
    from cosim.results import schema

    fabric = topology.single_switch(hosts=5, link_gbps=100.0, link_delay_ns=1000.0)
    flows = fl.incast(fabric.host_ids, size_bytes=1_000_000)
    out = engine.simulate(fabric, flows, attributes={"HostNic::DcqcnEnabled": "false",  # PFC does the work
                                                     "SharedBufferMmu::BufferBytes": "2000000"})
    assert list(out.logs) == [info.name for info in engine.event_logs()]
    assert out.logs["pauses"]["time_ns"].size > 0
    for info in engine.event_logs():
        assert info.columns[0].role == "time" and [c.name for c in info.columns[1:3]] == ["node", "port"]
        log = out.logs[info.name]
        assert list(log) == [c.python_name for c in info.columns]
        assert (np.diff(log["time_ns"]) >= 0).all()
        for c in info.columns:
            assert log[c.python_name].dtype == (np.float64 if c.unit == "ps" else np.dtype(c.dtype))
            assert schema.DATASETS[(info.name, c.python_name)][0] == ("ns" if c.unit == "ps" else c.unit)
        assert set(schema.required_columns(info.name)) == set(log)


def test_environment_does_not_need_ld_library_path():
    assert "ns3" not in os.environ.get("LD_LIBRARY_PATH", "")
