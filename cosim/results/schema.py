"""The results schema: what a run record holds and the units and meaning of every dataset."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cosim.errors import CosimInputError
from cosim.losses import CAUSE_TEXT

SCHEMA = "cosim.results"
SCHEMA_VERSION = 1

#: (group, dataset) -> (units, description)
DATASETS: dict[tuple[str, str], tuple[str, str]] = {
    ("flows", "src"): ("", "source host node id"),
    ("flows", "dst"): ("", "destination host node id"),
    ("flows", "size_bytes"): ("B", "payload bytes of the flow"),
    ("flows", "start_ns"): ("ns", "time the sender may start"),
    ("flows", "finish_ns"): ("ns", "time the last payload byte arrived (nan: unfinished)"),
    ("flows", "delivered_bytes"): ("B", "payload bytes delivered to the receiver"),
    ("flows", "fct_ns"): ("ns", "flow completion time, finish_ns - start_ns"),
    ("queues", "time_ns"): ("ns", "sample time"),
    ("queues", "node"): ("", "switch node id"),
    ("queues", "port"): ("", "egress port number at the node"),
    ("queues", "bytes"): ("B", "queued wire bytes (recorded when it changed since the last sample)"),
    ("ports", "node"): ("", "node id owning the egress port"),
    ("ports", "port"): ("", "port number at the node"),
    ("ports", "peer"): ("", "node id at the far end of the link"),
    ("ports", "tx_bytes"): ("B", "wire bytes transmitted"),
    ("ports", "tx_packets"): ("", "packets transmitted"),
    ("ports", "drops"): ("", "packets dropped"),
    ("ports", "peak_queue_bytes"): ("B", "largest egress queue seen"),
    ("ports", "paused_ps"): ("ps", "time the port was paused by PFC, summed over priorities"),
    ("pauses", "time_ns"): ("ns", "time of a PFC pause-state change"),
    ("pauses", "node"): ("", "node whose egress port changed state"),
    ("pauses", "port"): ("", "port number at the node"),
    ("pauses", "priority"): ("", "priority class"),
    ("pauses", "paused"): ("", "1 paused, 0 resumed"),
    ("latency", "low_ns"): ("ns", "lower edge of a log-spaced receive-latency bucket (8 per octave)"),
    ("latency", "count"): ("", "data packets whose one-way latency fell in the bucket"),
    ("flows", "ideal_ns"): ("ns", "ideal FCT: the flow alone on the idle fabric, store-and-forward at line rates "
                                  "plus propagation delays, to the last byte's arrival (one way)"),
    ("flows", "slowdown"): ("", "fct_ns / ideal_ns (>= 1; nan: unfinished)"),
    ("flows", "transfer"): ("", "training runs: row of the first flow of the flow's transfer (all chunks one "
                                "collective or send moves from one rank to another in an iteration)"),
    ("ports", "rate_bps"): ("bit/s", "line rate of the egress port"),
    ("ports", "credit_stall_ps"): ("ps", "time the port had data but no credits (InfiniBand), summed over VLs"),
    ("stalls", "time_ns"): ("ns", "time of a credit-stall state change"),
    ("stalls", "node"): ("", "node whose egress port changed state"),
    ("stalls", "port"): ("", "port number at the node"),
    ("stalls", "vl"): ("", "virtual lane"),
    ("stalls", "stalled"): ("", "1 stall began (data queued, no credits), 0 ended"),
    ("ops", "iteration"): ("", "iteration index"),
    ("ops", "trace_op"): ("", "op index in the workload trace"),
    ("ops", "rank"): ("", "GPU rank"),
    ("ops", "kind"): ("", "trace OpKind: 0 COMPUTE, 1 COLLECTIVE, 2 SEND, 3 RECV"),
    ("ops", "phase"): ("", "trace Phase: 0 FORWARD, 1 BACKWARD, 2 GRAD_SYNC, 3 OPTIMIZER, 4 OTHER"),
    ("ops", "coll_id"): ("", "collective call id (trace coll_id), -1 if none"),
    ("ops", "start_ns"): ("ns", "time the op started"),
    ("ops", "finish_ns"): ("ns", "time the op completed"),
    ("ops", "group_kind"): ("", "trace GroupKind of the op's group: 0 TP, 1 CP, 2 PP, 3 DP, 4 EP, 5 EDP, 6 EMBD, "
                                "7 WORLD, 8 OTHER; 255 none (compute)"),
    ("ops", "medium"): ("", "where the op's bytes move: 0 none (compute), 1 nvlink (every member in one server), "
                            "2 fabric (members on several servers: NICs and switches; cosim.results.exposure)"),
    ("collectives", "iteration"): ("", "iteration index"),
    ("collectives", "coll_id"): ("", "collective call id (trace coll_id)"),
    ("collectives", "kind"): ("", "trace CollKind: 1 ALL_REDUCE, 2 REDUCE_SCATTER, 3 ALL_GATHER, 4 ALL_TO_ALL, 5 BROADCAST"),
    ("collectives", "group"): ("", "index into the trace's groups table"),
    ("collectives", "group_kind"): ("", "trace GroupKind of the group: 0 TP, 1 CP, 2 PP, 3 DP, 4 EP, 5 EDP, 6 EMBD, "
                                        "7 WORLD, 8 OTHER"),
    ("collectives", "ranks"): ("", "members of the group (n of the busbw factor)"),
    ("collectives", "bytes"): ("B", "collective size S (nccl-tests convention)"),
    ("collectives", "algorithm"): ("", "lowering algorithm (cosim.collectives Algorithm)"),
    ("collectives", "start_ns"): ("ns", "time every member was ready"),
    ("collectives", "finish_ns"): ("ns", "time the last member completed"),
    ("iterations", "iteration"): ("", "iteration index"),
    ("iterations", "start_ns"): ("ns", "first op start"),
    ("iterations", "finish_ns"): ("ns", "last op finish"),
    ("iterations", "time_ns"): ("ns", "iteration time, finish_ns - start of the iteration"),
    ("iterations", "exposed_comm_ns"): ("ns", "iteration time not covered by compute on the busiest rank"),
    ("flows", "workload"): ("", "shared fabrics: index of the flow's workload in config['workloads']"),
    ("ops", "workload"): ("", "shared fabrics: index of the op's workload in config['workloads']"),
    ("collectives", "workload"): ("", "shared fabrics: index of the call's workload in config['workloads']"),
    ("iterations", "workload"): ("", "shared fabrics: index of the iteration's workload in config['workloads']"),
    # faults (cosim.faults): one row per action the engine or a fault kind took; older files lack it
    ("faults", "time_ns"): ("ns", "time of the action"),
    ("faults", "fault"): ("", "index of the fault in config['faults']['faults'] (the run's concrete faults); -1: "
                              "a mechanism acted (PFC watchdog, collective timeout)"),
    ("faults", "kind"): ("", "fault kind code (config['faults']['kind_codes'], e.g. 1 link_down, 2 link_flap, "
                             "3 link_degrade, 4 switch_down, 5 nic_down, 6 pause_storm, 7 straggler); -1 with "
                             "fault -1"),
    ("faults", "action"): ("", "what happened (config['faults']['actions']): 0 down, 1 up, 2 reroute (routes "
                               "converged around the change), 3 degrade, 4 restore, 5 storm_start, 6 storm_end, "
                               "7 queue_disabled and 8 queue_restored (PFC watchdog), 9 slowed (straggler), "
                               "10 collective_timeout (node: the failed rank's NIC)"),
    ("faults", "link"): ("", "fabric link id acted on, -1 if none"),
    ("faults", "node"): ("", "node id acted on (a rerouting switch, a NIC), -1 if none"),
    # PFC watchdog (network.pfc_watchdog): one row per action; only runs with the watchdog on hold it
    ("pfc_watchdog", "time_ns"): ("ns", "time of the action"),
    ("pfc_watchdog", "node"): ("", "switch node id"),
    ("pfc_watchdog", "port"): ("", "egress port number at the switch"),
    ("pfc_watchdog", "priority"): ("", "priority whose queue changed"),
    ("pfc_watchdog", "disabled"): ("", "1: queue disabled (paused past PfcWatchdog::DetectionTime), 0: restored"),
    # packets lost, trimmed or sent again (cosim.losses): one row per packet; lossless runs have none
    ("losses", "time_ns"): ("ns", "time of the loss (a NIC's resend: when it sent the packet again)"),
    ("losses", "node"): ("", "node whose egress port lost, trimmed or resent the packet"),
    ("losses", "port"): ("", "port number at the node (a NIC: 0)"),
    ("losses", "cause"): ("", f"{CAUSE_TEXT} (one row per packet; a timeout: one per expiry)"),
}

# ---- inference runs (cosim.kinds.inference): one row per request; files of other runs have no such group
REQUESTS_DATASETS: dict[tuple[str, str], tuple[str, str]] = {
    ("requests", "request"): ("", "request index, in arrival order"),
    ("requests", "arrival_ns"): ("ns", "time the request arrived"),
    ("requests", "prompt_tokens"): ("", "prompt (prefill) tokens"),
    ("requests", "output_tokens"): ("", "output tokens, the first (made by the prefill) included"),
    ("requests", "prefill_replica"): ("", "prefill replica that ran its prompt"),
    ("requests", "decode_replica"): ("", "decode replica that made its other tokens"),
    ("requests", "prefill_start_ns"): ("ns", "start of its prefill step (replica free and the batch arrived)"),
    ("requests", "prefill_end_ns"): ("ns", "end of its prefill step"),
    ("requests", "kv_start_ns"): ("ns", "first byte of its KV cache sent"),
    ("requests", "kv_end_ns"): ("ns", "last byte of its KV cache received by the decode replica"),
    ("requests", "first_token_ns"): ("ns", "KV cache and first token on the decode replica"),
    ("requests", "last_token_ns"): ("ns", "end of the decode step that made its last token"),
    ("requests", "ttft_ns"): ("ns", "time to first token, first_token_ns - arrival_ns"),
    ("requests", "tpot_ns"): ("ns", "time per output token after the first, (last - first) / (output_tokens - 1); "
                                    "nan for one output token"),
    ("requests", "e2e_ns"): ("ns", "end-to-end latency, last_token_ns - arrival_ns"),
    ("requests", "queueing_ns"): ("ns", "wait for a prefill step, prefill_start_ns - arrival_ns"),
    ("requests", "kv_transfer_ns"): ("ns", "KV transfer time, kv_end_ns - kv_start_ns"),
    ("requests", "kv_bytes"): ("B", "KV-cache bytes moved from the prefill to the decode replica"),
}
DATASETS |= REQUESTS_DATASETS
# ---- the fabric and placement the run ran on (every run since the run plan; older files lack them)
FABRIC_DATASETS: dict[tuple[str, str], tuple[str, str]] = {
    ("nodes", "kind"): ("", "0 host (NIC), 1 switch; a node's id is its row"),
    ("nodes", "tier"): ("", "0 host, 1 leaf/ToR/rail, 2 spine/aggregation, 3 core"),
    ("nodes", "name"): ("", "name of the node (host3, leaf1, spine0): what the figures and fault elements call it; "
                            "the node-id columns of the other tables index it"),
    ("links", "a"): ("", "node id of one end; a link's id is its row"),
    ("links", "b"): ("", "node id of the other end"),
    ("links", "rate_bps"): ("bit/s", "rate of the link, each direction"),
    ("links", "delay_ns"): ("ns", "one-way propagation delay"),
    ("links", "tier"): ("", "tier of the link's upper end"),
    ("hosts", "node"): ("", "node id of a host (NIC), in node order"),
    ("hosts", "server"): ("", "server (chassis) the NIC sits in"),
    ("hosts", "gpu"): ("", "local GPU the NIC serves inside its server"),
    ("placement", "workload"): ("", "workload (job) index: config['workloads'] of a multi-workload run, 0 otherwise"),
    ("placement", "slot"): ("", "slot of the workload: its rank for training and inference, else its n-th host"),
    ("placement", "host"): ("", "host node id the slot runs on"),
}
DATASETS |= FABRIC_DATASETS
GROUPS = ("flows", "queues", "ports", "pauses", "latency", "stalls", "ops", "collectives", "iterations", "faults",
          "pfc_watchdog", "requests", "nodes", "links", "hosts", "placement", "losses")

#: datasets whose values may be nan, as documented: times of flows, ops, collectives and iterations that did
#: not finish (a run cut by its time limit)
NAN_OK = frozenset({
    ("flows", "finish_ns"), ("flows", "fct_ns"), ("flows", "slowdown"),
    ("ops", "start_ns"), ("ops", "finish_ns"), ("collectives", "start_ns"), ("collectives", "finish_ns"),
    ("iterations", "start_ns"), ("iterations", "finish_ns"), ("iterations", "time_ns"),
    ("iterations", "exposed_comm_ns"),
    *((g, n) for g, n in REQUESTS_DATASETS if n.endswith("_ns") and n != "arrival_ns"),
})
#: integer datasets that use -1 for "none" (every other known dataset is non-negative)
MINUS_ONE_OK = frozenset({("ops", "coll_id"), ("faults", "link"), ("faults", "node"), ("faults", "fault"),
                          ("faults", "kind")})

#: columns added to version 1 after its first files: a table written before may lack them
LATER_COLUMNS = frozenset({("flows", "ideal_ns"), ("flows", "slowdown"), ("ports", "rate_bps"),
                           ("ports", "credit_stall_ps"), ("collectives", "group_kind"), ("collectives", "ranks"),
                           ("flows", "transfer"), ("flows", "workload"), ("ops", "workload"),
                           ("collectives", "workload"), ("iterations", "workload"), ("nodes", "name"),
                           ("ops", "group_kind"), ("ops", "medium")})
#: columns of text (UTF-8 strings); every other known column holds numbers
TEXT_COLUMNS = frozenset({("nodes", "name")})

#: columns only runs of several workloads on one fabric hold (cosim.record)
SHARED_FABRIC_COLUMNS = frozenset({("flows", "workload"), ("ops", "workload"), ("collectives", "workload"),
                                   ("iterations", "workload")})


def required_columns(group: str) -> tuple[str, ...]:
    """The columns a stored table ``group`` must hold (every schema column but LATER_COLUMNS)."""
    return tuple(n for g, n in DATASETS if g == group and (g, n) not in LATER_COLUMNS)


@dataclass(frozen=True, slots=True)
class Column:
    """What a known dataset must hold: its dtype kind (``"f"`` float, ``"i"`` integer), whether nan is
    allowed (else every value is finite), and its smallest allowed value."""

    kind: str  # "f" float, "i" integer, "s" text
    nan_ok: bool
    minimum: float


def column_rule(group: str, name: str) -> Column | None:
    """The rule of dataset ``group/name`` (None for a dataset the schema does not know): times (``*_ns``),
    rates and slowdowns are floats, everything else integers; all non-negative, nan only where documented."""
    if (group, name) not in DATASETS:
        return None
    if (group, name) in TEXT_COLUMNS:
        return Column(kind="s", nan_ok=False, minimum=0)
    kind = "f" if name.endswith("_ns") or name in ("slowdown", "rate_bps") else "i"
    return Column(kind=kind, nan_ok=(group, name) in NAN_OK, minimum=-1 if (group, name) in MINUS_ONE_OK else 0)



@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunRecord:
    """One run as stored: config and provenance (JSON-able dicts), summary scalars, and array tables."""

    name: str
    config: dict
    provenance: dict
    summary: dict
    flows: dict[str, np.ndarray] = field(default_factory=dict)
    queues: dict[str, np.ndarray] = field(default_factory=dict)
    ports: dict[str, np.ndarray] = field(default_factory=dict)
    pauses: dict[str, np.ndarray] = field(default_factory=dict)
    latency: dict[str, np.ndarray] = field(default_factory=dict)
    stalls: dict[str, np.ndarray] = field(default_factory=dict)
    ops: dict[str, np.ndarray] = field(default_factory=dict)
    collectives: dict[str, np.ndarray] = field(default_factory=dict)
    iterations: dict[str, np.ndarray] = field(default_factory=dict)
    faults: dict[str, np.ndarray] = field(default_factory=dict)
    pfc_watchdog: dict[str, np.ndarray] = field(default_factory=dict)
    requests: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: dict[str, np.ndarray] = field(default_factory=dict)
    links: dict[str, np.ndarray] = field(default_factory=dict)
    hosts: dict[str, np.ndarray] = field(default_factory=dict)
    placement: dict[str, np.ndarray] = field(default_factory=dict)
    losses: dict[str, np.ndarray] = field(default_factory=dict)

    def table(self, group: str) -> dict[str, np.ndarray]:
        """The arrays of ``group`` (one of GROUPS; empty if the run has none)."""
        if group not in GROUPS:
            raise KeyError(group)
        return getattr(self, group)

    @property
    def op_table(self) -> str:
        """The run's telemetry.op_table: which ops rows it stores ("all" for files written before the field)."""
        exp = self.config.get("experiment")
        telemetry = exp.get("telemetry") if isinstance(exp, dict) else None
        return str(telemetry.get("op_table", "all")) if isinstance(telemetry, dict) else "all"

    def missing_ops(self) -> CosimInputError | None:
        """Why the run has no ops table although it ran a training job (telemetry.op_table = "none"), as the
        one-line error a reader that needs the table raises or shows; None when the table is there or the run
        never had one."""
        if self.ops or self.op_table != "none":
            return None
        return CosimInputError("telemetry.op_table", f'is "none" in run {self.name!r}, which stores no ops table',
                               "rerun with --op-table all, or collectives for its communication ops only")
