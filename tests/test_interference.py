"""Compute–communication interference: a GPU's compute runs slower while it has a transfer in flight.

The DagExecutor (CommComputeSlowdown = f) advances a COMPUTE op at rate 1 − f while its GPU sends, and at
full rate otherwise; the op's finish is where its work, integrated over those rates, reaches its duration.
"""

import numpy as np
import pytest

from cosim import engine
from cosim.collectives.calibration import executor_attributes
from cosim.collectives.dag import DagOpKind
from cosim.network import topology
from cosim.workload.hardware import get_hardware

FLOW, COMPUTE = int(DagOpKind.FLOW), int(DagOpKind.COMPUTE)


def run(slowdown: float, compute_gpu: int, compute_ns: float, flow_bytes: int = 1 << 20):
    """A flow host 0 → host 1 and, beside it from t = 0, one compute op on ``compute_gpu``."""
    fab = topology.point_to_point(link_gbps=400, link_delay_ns=1000)
    out = engine.simulate_dag(
        fab, kind=np.array([FLOW, COMPUTE], np.uint8), gpu=np.array([0, compute_gpu], np.int32),
        src_node=np.array([0, -1], np.int32), dst_node=np.array([1, -1], np.int32),
        bytes_=np.array([flow_bytes, 0], np.int64), duration_ns=np.array([0.0, compute_ns]),
        priority=np.zeros(2, np.uint8), dep_ptr=np.zeros(3, np.int64), dep_idx=np.zeros(0, np.int64),
        attributes={"DagExecutor::CommComputeSlowdown": repr(slowdown)})
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


def test_executor_slowdown_is_the_share_of_sms_nccl_holds():
    h100 = get_hardware("h100")
    attrs = executor_attributes({"sm_count": h100.sm_count, "nccl_sms": h100.nccl_sms})
    assert float(attrs["DagExecutor::CommComputeSlowdown"]) == pytest.approx(16 / 132)
    assert float(executor_attributes({"sm_count": 108, "nccl_sms": 0})["DagExecutor::CommComputeSlowdown"]) == 0
