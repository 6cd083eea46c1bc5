"""No input reaches an ns-3 abort: attribute values the models cannot run with are one-line errors (exit 2,
no file), attributes a run sets itself are refused with the field to use, and lossless means lossless."""

from __future__ import annotations

import pytest

from fuzz_contract import check_contract, run_cosim

SMALL = ["run", "--hosts", "4", "--flow-bytes", "64KiB", "-q"]


@pytest.mark.parametrize("setting,transport,needle", [
    ("HostNic::Dcqcn=abc", "roce", "is a model object, not a value"),
    ("HostNic::Dcqcn=0", "roce", "is a model object, not a value"),
    ("FabricSwitch::Mmu=abc", "roce", "is a model object, not a value"),
    ("EgressPort::LinkFlowControl=none", "roce", "is set by the run itself"),
    ("EgressPort::VlArbitrationWeights=0", "ib", "entry '0' is not an integer 1..255"),
    ("EgressPort::VlArbitrationWeights=-3,1", "ib", "is not an integer 1..255"),
    ("EgressPort::VlArbitrationWeights=1,2,3,4,5,6,7,8,9", "ib", "needs 1..8 comma-separated weights"),
    ("DagExecutor::NvlinkDataRate=1bps", "roce", "must be between 1Mbps and 1000Tbps"),
    ("HostNic::CnpInterval=-1us", "roce", "is not a valid ns3::TimeValue"),
    ("EgressPort::DataVls=0", "ib", "accepted: uint32_t 1:8"),
    ("EgressPort::DataRate=0bps", "roce", "use network.link_gbps"),
    ("EgressQueueSampler::Interval=2us", "roce", "use telemetry.queue_sample_interval_ns"),
    ("EgressPort::PropagationDelay=1us", "roce", "use network.link_delay_ns"),
    ("FabricSwitch::EcmpSeed=3", "roce", "use seed"),
    ("FabricSwitch::HeadroomBytes=5000", "roce", "below the 37702 B in flight"),
])
def test_hostile_attribute_is_one_line_error(setting, transport, needle, tmp_path):
    """Each setting used to abort ns-3 (exit 133/136) or be silently ignored; now exit 2, one line."""
    out = tmp_path / "r.h5"
    proc = run_cosim([*SMALL, "--transport", transport, "--set", setting, "-o", str(out)], cwd=tmp_path)
    check_contract(proc, out)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_nvlink_rate_checked_in_a_training_run(tmp_path):
    """A rate the picosecond clock cannot serialize is refused before a co-simulation starts."""
    from pathlib import Path

    trace = Path(__file__).resolve().parents[1] / "traces" / "llama2-7b-2l_tp2-pp2-dp2.h5"
    out = tmp_path / "t.h5"
    proc = run_cosim(["run", "--trace", str(trace), "--gpus-per-server", "2", "--set",
                      "DagExecutor::NvlinkDataRate=10bps", "-q", "-o", str(out)], cwd=tmp_path)
    check_contract(proc, out)
    assert proc.returncode == 2 and "DagExecutor::NvlinkDataRate" in proc.stderr


def _incast(headroom_bytes: int, lossy: bool = False):
    from cosim.runs import run as runner
    from cosim.runs.experiment import make

    attrs = {"attributes.FabricSwitch::HeadroomBytes": str(headroom_bytes),
             "attributes.SharedBufferMmu::BufferBytes": "1000000",
             "attributes.SharedBufferMmu::LosslessPriorityMask": "1"}
    if lossy:
        attrs["attributes.FabricSwitch::AllowLossyHeadroom"] = "true"
    return runner.run(make("flows", hosts=8, flow_bytes=512 << 10, dcqcn=False, **attrs))


def test_headroom_at_the_physical_need_is_lossless(engine_ns):
    """Headroom exactly 2·BDP + 3 maximum packets + 2 PAUSE frames (the automatic value at 100 Gbps and
    1 µs: 37,702 B) keeps an 8-to-1 incast lossless: no drop, every byte delivered."""
    rec = _incast(37_702)
    s = rec.summary
    assert s["status"] == "complete" and s["drops"] == 0 and s["switch_drops"] == 0
    assert s["delivered_bytes"] == s["payload_bytes"] and s["pause_frames_sent"] > 0


def test_lossy_headroom_opt_in_counts_its_drops_and_recovers(engine_ns):
    """With AllowLossyHeadroom a too-small headroom runs lossy: every packet a switch drops shows in the
    summary's drops, go-back-N resends at least as many packets as were lost, and every byte arrives."""
    rec = _incast(4_200, lossy=True)
    s = rec.summary
    assert s["switch_drops"] > 0 and s["drops"] >= s["switch_drops"]
    assert s["retransmitted_packets"] >= s["switch_drops"]
    assert s["status"] == "complete" and s["delivered_bytes"] == s["payload_bytes"]
