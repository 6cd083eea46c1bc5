"""Compute–communication interference: a GPU's compute runs slower while it has a transfer in flight.

The DagExecutor (CommComputeSlowdown = f) advances a COMPUTE op at rate 1 − f while its GPU sends, and at
full rate otherwise; the op's finish is where its work, integrated over those rates, reaches its duration.
"""

import numpy as np
import pytest

from cosim import engine
from cosim.collectives.calibration import executor_attributes
from cosim.collectives.dag import CommClass, DagOpKind
from cosim.network import topology
from cosim.workload.hardware import get_hardware

FLOW, COMPUTE = int(DagOpKind.FLOW), int(DagOpKind.COMPUTE)


def run(slowdown: float, compute_gpu: int, compute_ns: float, flow_bytes: int = 1 << 20,
        comm_class: int | None = None, expert_slowdown: float = 0.0):
    """A flow host 0 → host 1 and, beside it from t = 0, one compute op on ``compute_gpu``."""
    fab = topology.point_to_point(link_gbps=400, link_delay_ns=1000)
    out = engine.simulate_dag(
        fab, kind=np.array([FLOW, COMPUTE], np.uint8), gpu=np.array([0, compute_gpu], np.int32),
        src_node=np.array([0, -1], np.int32), dst_node=np.array([1, -1], np.int32),
        bytes_=np.array([flow_bytes, 0], np.int64), duration_ns=np.array([0.0, compute_ns]),
        priority=np.zeros(2, np.uint8), dep_ptr=np.zeros(3, np.int64), dep_idx=np.zeros(0, np.int64),
        comm_class=None if comm_class is None else np.array([comm_class, 0], np.uint8),
        attributes={"DagExecutor::CommComputeSlowdown": repr(slowdown),
                    "DagExecutor::ExpertCommComputeSlowdown": repr(expert_slowdown)})
    return out.op_finish_ns[0], out.op_finish_ns[1]


@pytest.mark.parametrize("slowdown", [0.12, 0.5])
def test_compute_beside_a_send_loses_the_slowdown_while_the_send_lasts(engine_ns, slowdown):
    """A compute op longer than the flow: during the flow it does (1 − f)·T_flow of work, the rest at full
    rate, so it ends f·T_flow later than alone."""
    flow_ns, compute_end_ns = run(slowdown, compute_gpu=0, compute_ns=1e6)
    assert 0 < flow_ns < 1e6
    assert compute_end_ns == pytest.approx(1e6 + slowdown * flow_ns, abs=0.01)


def test_compute_inside_a_send_runs_at_the_reduced_rate_throughout(engine_ns):
    """A compute op that ends before the flow: its whole duration stretched by 1 / (1 − f)."""
    flow_ns, compute_end_ns = run(0.25, compute_gpu=0, compute_ns=1000.0)
    assert compute_end_ns < flow_ns
    assert compute_end_ns == pytest.approx(1000.0 / 0.75, abs=0.01)


def test_a_gpu_that_does_not_send_and_the_default_are_untouched(engine_ns):
    assert run(0.5, compute_gpu=1, compute_ns=1e6)[1] == pytest.approx(1e6, abs=1e-6)
    assert run(0.0, compute_gpu=0, compute_ns=1e6)[1] == pytest.approx(1e6, abs=1e-6)


@pytest.mark.parametrize("comm_class, lost", [(CommClass.NCCL, 0.1), (CommClass.EXPERT, 0.3),
                                              (CommClass.SM_FREE, 0.0)])
def test_the_kernels_that_move_a_transfer_set_what_compute_loses(engine_ns, comm_class, lost):
    """The same flow moved by NCCL (CommComputeSlowdown 0.1), by DeepEP's high-throughput kernels
    (ExpertCommComputeSlowdown 0.3) or by its SM-free low-latency receive: the compute beside it ends
    f·T_flow late with that kernel's f."""
    flow_ns, compute_end_ns = run(0.1, compute_gpu=0, compute_ns=1e6, comm_class=comm_class, expert_slowdown=0.3)
    assert compute_end_ns == pytest.approx(1e6 + lost * flow_ns, abs=0.01)


def test_deepep_sends_of_a_training_trace_are_expert_transfers():
    """In a DeepSeek-V3-shaped EP8 trace the FLOW and NVLINK ops lowered from DeepEP's high-throughput sends
    are EXPERT transfers, the low-latency kernels' SM_FREE ones, every other transfer (the DP all-reduce)
    NCCL's; a trace without DeepEP sends has no comm classes."""
    from test_moe_dispatch import _deepep_training_trace

    from cosim.collectives.lower import lower
    from cosim.kinds.base import comm_classes
    from cosim.workload.trace import OpKind

    for kernel, cls in (("deepep-high-throughput", CommClass.EXPERT), ("deepep-low-latency", CommClass.SM_FREE)):
        trace = _deepep_training_trace(kernel)
        dag = lower(trace, gpus_per_server=2)
        classes = comm_classes(dag, trace)
        transfer = np.isin(dag.kind, [FLOW, int(DagOpKind.NVLINK)])
        from_send = transfer & (dag.trace_op >= 0)
        from_send[from_send] = np.isin(trace.kind[dag.trace_op[from_send]], [OpKind.SEND, OpKind.RECV])
        assert np.all(classes[from_send] == cls) and from_send.any()
        assert np.all(classes[~from_send] == CommClass.NCCL) and (transfer & ~from_send).any()
    plain = _deepep_training_trace("nccl")
    assert comm_classes(lower(plain, gpus_per_server=2), plain) is None


def test_executor_slowdown_is_the_share_of_sms_nccl_holds():
    h100 = get_hardware("h100")
    attrs = executor_attributes({"sm_count": h100.sm_count, "nccl_sms": h100.nccl_sms})
    assert float(attrs["DagExecutor::CommComputeSlowdown"]) == pytest.approx(16 / 132)
    assert float(attrs["DagExecutor::ExpertCommComputeSlowdown"]) == pytest.approx(20 / 132)
    assert float(executor_attributes({"sm_count": 108, "nccl_sms": 0})["DagExecutor::CommComputeSlowdown"]) == 0
