"""No input reaches an ns-3 abort: attribute values the models cannot run with are one-line errors (exit 2,
no file), attributes a run sets itself are refused with the field to use, and lossless means lossless.

The exhaustive sweep (every attribute of every cosim model x hostile values of its value type, on a flow run
of both transports, a training run and the engine API, each in a child process so that an abort is an exit
code) is marked slow: ``pytest -m slow tests/test_reliability_inputs.py``, or as a script,
``python tests/test_reliability_inputs.py [incast|training|api ...]``, which prints what it tried and every
case that failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from fuzz_contract import REPO, check_contract, run_cosim

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
    ("DcqcnRateControl::AlphaUpdatePeriod=1e30s", "roce", "must be at most 1e5s"),
    ("HostNic::CnpInterval=1e999s", "roce", "must be at most 1e5s"),
    ("DeadlockWatchdog::Interval=2d", "roce", "must be at most 1e5s"),
    # 2^61 B reserved x 4 ports x 8 priorities is 2^66 B: a 64-bit sum wrapped it to 0 and ran
    ("SharedBufferMmu::ReservedBytes=2305843009213693952", "roce", "BufferBytes is too small"),
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
    from cosim.run import run
    from cosim.spec import make

    attrs = {"attributes.FabricSwitch::HeadroomBytes": str(headroom_bytes),
             "attributes.SharedBufferMmu::BufferBytes": "1000000",
             "attributes.SharedBufferMmu::LosslessPriorityMask": "1"}
    if lossy:
        attrs["attributes.FabricSwitch::AllowLossyHeadroom"] = "true"
    return run(make("flows", hosts=8, flow_bytes=512 << 10, dcqcn=False, **attrs))


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


# ---------------------------------------------------------------- the engine API, below the Experiment's checks

def _star(**kw):
    from cosim.network import topology

    return topology.single_switch(hosts=kw.pop("hosts", 4), link_gbps=kw.pop("link_gbps", 100.0),
                                  link_delay_ns=kw.pop("link_delay_ns", 1000.0))


@pytest.mark.parametrize("fabric_kw,kw,field", [
    ({"link_delay_ns": 1e12}, {}, "fabric.link_delay_ns"),  # 1000 s: its int64 picoseconds would still fit,
    ({"link_delay_ns": 1e17}, {}, "fabric.link_delay_ns"),  # these wrap around to negative delays
    ({"link_gbps": 1e7}, {}, "fabric.link_rate_bps"),  # 10 Pbit/s
    ({"link_gbps": 1e-4}, {}, "fabric.link_rate_bps"),  # 100 kbit/s
    ({}, {"queue_sample_interval_ns": 1e-9}, "queue_sample_interval_ns"),  # rounds to 0 ps
    ({}, {"queue_sample_interval_ns": float("nan")}, "queue_sample_interval_ns"),
    ({}, {"queue_sample_interval_ns": 1e15}, "queue_sample_interval_ns"),
    ({}, {"max_sim_time_ns": 1e17}, "max_sim_time_ns"),  # beyond ns-3's 2^63 ps clock
])
def test_engine_api_refuses_what_the_clock_cannot_hold(fabric_kw, kw, field, engine_ns):
    """engine.simulate, which skips the Experiment's checks, refuses link rates and delays, sampling
    intervals and time limits the engine's integer picoseconds cannot hold, naming the field."""
    from cosim import engine
    from cosim.errors import CosimInputError
    from cosim.workload import flows as fl

    fabric = _star(**fabric_kw)
    with pytest.raises(CosimInputError) as exc:
        engine.simulate(fabric, fl.incast(fabric.host_ids, size_bytes=4096), **kw)
    assert exc.value.field == field, str(exc.value)


def _dag_of(kind, bytes_, duration_ns, attributes=None):
    """simulate_dag of independent ops of GPU 0 (no FLOW op, so the fabric only carries them)."""
    from cosim import engine

    n = len(kind)
    zeros = np.zeros(n, np.int32)
    return engine.simulate_dag(_star(hosts=2), kind=np.asarray(kind, np.uint8), gpu=zeros, src_node=zeros,
                               dst_node=zeros, bytes_=np.asarray(bytes_, np.int64),
                               duration_ns=np.asarray(duration_ns, np.float64), priority=zeros.astype(np.uint8),
                               dep_ptr=np.zeros(n + 1, np.int64), dep_idx=np.zeros(0, np.int64),
                               attributes=attributes, max_sim_time_ns=1e9)


@pytest.mark.parametrize("kind,bytes_,duration_ns,attributes,says", [
    # two 600 GB copies at 1 Mbit/s: 4.8e18 ps each, and the second ends past 2^63 ps
    ("NVLINK", 600e9, 0, {"DagExecutor::NvlinkDataRate": "1Mbps"}, "raise DagExecutor::NvlinkDataRate"),
    ("COMPUTE", 0, 3e15, None, "shorten the COMPUTE ops"),
])
def test_dag_busy_time_beyond_the_clock_is_refused(kind, bytes_, duration_ns, attributes, says, engine_ns):
    """A DAG whose ops add up to more busy time than ns-3's clock holds is refused at load, naming the
    attribute to change, instead of scheduling an op's end at a wrapped-around, negative time."""
    from cosim.collectives.dag import DagOpKind
    from cosim.errors import CosimInputError

    k = int(DagOpKind[kind])
    with pytest.raises(CosimInputError, match=says):
        _dag_of([k, k], [bytes_] * 2, [duration_ns] * 2, attributes)


def test_every_attribute_is_listed_with_type_default_and_help(engine_ns):
    """Engine::ListAttributes names every attribute of every cosim model once, sorted, with its value type,
    a help text, and a default the engine accepts back."""
    from cosim import engine

    rows = engine.list_attributes()
    names = [r.name for r in rows]
    assert names == sorted(names) and len(names) == len(set(names))
    assert {"EgressPort::DataRate", "HostNic::Dcqcn", "FabricSwitch::AllowLossyHeadroom"} <= set(names)
    by_name = {r.name: r for r in rows}
    assert by_name["EgressPort::DataRate"].default == "100000000000bps"
    assert by_name["EgressPort::DataVls"].accepted == "uint32_t 1:8"
    assert by_name["EgressPort::LinkFlowControl"].accepted == "pfc|credit"
    e = engine_ns.Engine(1)
    try:
        for r in rows:
            assert r.value_type.startswith("ns3::") and r.help, r.name
            if r.value_type != "ns3::PointerValue":
                e.SetDefault("ns3::" + r.name, r.default)  # raises if the engine refused its own default
    finally:
        e.__destruct__()


# ---------------------------------------------------------------- the exhaustive sweep (slow)

TRACE = REPO / "traces" / "llama2-7b-2l_dp8-zero1.h5"

#: the CLI runs every hostile value is tried on: a 4-host incast on both transports, a tiny training run
CLI_RUNS = {
    "incast": ["--hosts", "4", "--flow-bytes", "64KiB", "--transport", "both"],
    "training": ["--trace", str(TRACE), "--gpus-per-server", "4"],
}

#: the engine API with the attribute straight to the C++ checks (no Experiment, so no Python-side checks)
API_RUN = """
import sys
from cosim import engine
from cosim.errors import CosimInputError
from cosim.network import topology
from cosim.workload import flows as fl
fabric = topology.single_switch(hosts=4, link_gbps=100.0, link_delay_ns=1000.0)
try:
    engine.simulate(fabric, fl.incast(fabric.host_ids, size_bytes=65536), attributes={sys.argv[1]: sys.argv[2]},
                    max_sim_time_ns=1e7)
except CosimInputError as exc:
    print(f"Error: {exc}", file=sys.stderr)
    sys.exit(2)
"""

#: values that break naive parsers and models, by ns-3 value type
HOSTILE_VALUES = {
    "ns3::UintegerValue": ("0", "-1", "18446744073709551615", "1e30", "nan", "abc"),
    "ns3::IntegerValue": ("0", "-1", "9223372036854775807", "nan", "abc"),
    "ns3::DoubleValue": ("0", "-1", "1e308", "nan", "inf", "abc"),
    "ns3::BooleanValue": ("0", "-1", "abc"),
    "ns3::TimeValue": ("0", "0ps", "-1ns", "1e5s", "1e30s", "nan", "abc"),
    "ns3::DataRateValue": ("0bps", "1bps", "1000Tbps", "1e30bps", "-1bps", "nan", "abc"),
    "ns3::StringValue": ("", "0", "-1", "abc", "1,2,3,4,5,6,7,8,9"),
}
#: for any other value type (enums, model objects)
OTHER_HOSTILE_VALUES = ("", "0", "-1", "abc")


def run_case(kind: str, name: str, value: str, out: Path, timeout_s: float = 300.0) -> subprocess.CompletedProcess:
    """One attribute setting on ``kind`` (a CLI_RUNS key, or "api") in a child process; a timeout comes back
    as exit code -1000."""
    if kind == "api":
        cmd = [sys.executable, "-c", API_RUN, name, value]
    else:
        cmd = [sys.executable, "-m", "cosim", "run", *CLI_RUNS[kind], "--set", f"{name}={value}", "-q", "-o", str(out)]
    try:
        return subprocess.run(cmd, cwd=out.parent, capture_output=True, text=True, timeout=timeout_s,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -1000, "", f"no answer within {timeout_s:.0f} s")


def sweep(attributes, kinds=("incast", "training", "api"), workers: int = 2, tmp: Path = Path("/tmp")):
    """Try every hostile value of every (name, value type) of ``attributes`` on every run kind, each against
    the input contract (fuzz_contract.check_contract); return (cases tried, [(kind, name, value, why)] of
    the cases that broke it)."""
    cases = [(kind, name, value) for name, value_type in attributes
             for value in HOSTILE_VALUES.get(value_type, OTHER_HOSTILE_VALUES) for kind in kinds]

    def one(i_case):
        i, (kind, name, value) = i_case
        case_dir = tmp / f"fuzz-{os.getpid()}-{i}"
        case_dir.mkdir(parents=True, exist_ok=True)
        out = case_dir / "out.h5"
        proc = run_case(kind, name, value, out)
        try:
            check_contract(proc, out)
            return None
        except AssertionError as exc:
            return kind, name, value, str(exc).splitlines()[0][:300]
        finally:
            for f in case_dir.iterdir():
                f.unlink()
            case_dir.rmdir()

    with ThreadPoolExecutor(workers) as pool:
        failures = [f for f in pool.map(one, enumerate(cases)) if f]
    return len(cases), failures


def _attributes_by_value_type():
    from cosim import engine

    return [(r.name, r.value_type) for r in engine.list_attributes()]


@pytest.mark.slow
def test_no_attribute_value_aborts(tmp_path):
    """Every attribute of every cosim model x its hostile values, on an incast (both transports), a training
    run and the engine API: no run dies by a signal, hangs, exits other than 0/1/2 or prints a traceback,
    and every input error is one line and leaves no file."""
    tried, failures = sweep(_attributes_by_value_type(), tmp=tmp_path)
    assert not failures, f"{len(failures)} of {tried} cases failed:\n" + "\n".join(map(str, failures))


if __name__ == "__main__":
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    _attrs = _attributes_by_value_type()
    _kinds = tuple(sys.argv[1:]) or ("incast", "training", "api")
    _tried, _failures = sweep(_attrs, kinds=_kinds, workers=os.cpu_count() or 2)
    print(f"{len(_attrs)} attributes, {_tried} cases ({', '.join(_kinds)}): {len(_failures)} failed")
    for _f in _failures:
        print("  ", *_f)
    sys.exit(1 if _failures else 0)
