"""The built-in training scenario that a bare ``cosim run`` co-simulates (on RoCE and on InfiniBand).

Workload: a 4-layer model of LLaMA-2 7B's shape (h 4096, 32 heads, FFN 11008, vocabulary 32000, sequence
4096 tokens) on 16 H100 GPUs, 4 per server: TP 4 inside each server (NVLink), PP 2 and DP 2 across
servers, 8 micro-batches of 1 sequence in 1F1B, distributed optimizer (ZeRO-1: gradient reduce-scatter and
parameter all-gather buckets). Ranks are placed TP-fastest, so a server holds one pipeline stage of one
data-parallel replica: pipeline sends cross one leaf switch, data-parallel traffic crosses the spines.

Fabric: 4 servers × 4 NICs at 100 Gbps on a leaf-spine fabric, 2 servers per leaf, 2 spines, leaf uplinks
oversubscribed 2:1 (each leaf: 8 × 100 Gbps down, 2 × 200 Gbps up), 1 µs per link. When all 8 NICs of a
leaf reduce-scatter their gradients to the other leaf, the uplinks are overloaded twice over: RoCE queues
build at the leaf uplinks until PFC pauses the senders (the switches' dynamic threshold is lowered to
α = 1/16 of the free shared buffer so a congested ingress reaches XOFF before the 32 MiB buffer fills),
and InfiniBand senders stall for credits.

Two iterations: the first warms the fabric up, the second is the reported iteration time. Measured cost
on a 2-core machine: see ``bench/README.md`` ("the built-in scenario").
"""

from __future__ import annotations

#: everything that defines the scenario, so the docs, the CLI and the tests agree
MODEL = "llama2-7b"
MODEL_OVERRIDES = {"num_layers": 4}
PARALLELISM = {"tp": 4, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 16, "zero_stage": 1}
GPU = "h100"
GPUS_PER_SERVER = 4
SPEC = {
    "topology": "leaf-spine",
    "gpus_per_server": GPUS_PER_SERVER,
    "hosts_per_leaf": 2 * GPUS_PER_SERVER,
    "spines": 2,
    "oversubscription": 2.0,
    "link_gbps": 100.0,
    "link_delay_ns": 1000.0,
    "iterations": 2,
    "attributes": (("SharedBufferMmu::DynamicThresholdAlpha", "0.0625"),),
}
DESCRIPTION = ("built-in scenario: LLaMA-2-7B-shaped 4 layers, TP4 x PP2 x DP2 (ZeRO-1) on 4 servers x 4 GPUs, "
               "leaf-spine 2 spines 2:1, 100 Gbps, 2 iterations")


def default_trace():
    """The scenario's workload trace (built in memory, deterministic)."""
    from cosim.workload.builder import build_trace  # noqa: PLC0415
    from cosim.workload.hardware import get_hardware  # noqa: PLC0415
    from cosim.workload.model import get_model  # noqa: PLC0415
    from cosim.workload.parallelism import ParallelismSpec  # noqa: PLC0415

    return build_trace(get_model(MODEL, **MODEL_OVERRIDES), ParallelismSpec(**PARALLELISM),
                       get_hardware(GPU, gpus_per_host=GPUS_PER_SERVER))


def default_spec(**overrides):
    """The scenario's TrainingSpec (with its trace in memory); ``overrides`` replace TrainingSpec fields.

    ``attributes`` given in ``overrides`` are applied after the scenario's own (so they win).
    """
    from cosim.runs.training import TrainingSpec  # noqa: PLC0415

    fields = dict(SPEC)
    extra = overrides.pop("attributes", ())
    if isinstance(extra, dict):
        extra = tuple(extra.items())
    fields["attributes"] = tuple(SPEC["attributes"]) + tuple(extra)
    fields |= overrides
    if fields.get("trace_path") is None:
        fields.setdefault("trace", default_trace())
    return TrainingSpec(**fields)
