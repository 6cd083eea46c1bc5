"""The names of the figures ``cosim plot`` and ``cosim report`` draw, and what each shows (import-light: the
CLI lists them in ``--help`` without loading numpy or matplotlib).

A figure's files are named after it: shared figures overlay every run (``fct-cdf.png``), per-run figures
carry the run's name (``queues-RUN.png``).
"""

from __future__ import annotations

#: figures overlaying every run on shared axes: name -> what it shows
SHARED = {
    "fct-cdf": "flow-completion-time CDF",
    "fct-slowdown-cdf": "FCT slowdown (FCT / ideal) CDF",
    "latency-cdf": "one-way packet-latency CDF",
    "sweep": "the key metric against the swept value, a line per transport (3 or more runs)",
    "ttft-cdf": "time to first token CDF (inference runs)",
    "tpot-cdf": "time per output token CDF (inference runs)",
}
#: figures drawn once per run: name -> what it shows
PER_RUN = {
    "queues": "queue depth over time of the --top hottest egress ports",
    "queue-heatmap": "port x time heatmap of queue depth, peak per bin",
    "pfc-pauses": "PFC pause intervals per port and priority (when the run paused)",
    "credit-stalls": "InfiniBand credit-stall intervals per port and VL (when present)",
    "iterations": "per-rank compute / communication Gantt chart (co-simulation runs)",
    "requests": "per-request queued / prefill / KV transfer / decode timeline (inference runs)",
    "iteration-faults": "iteration time around the faults, with the --baseline run's, fault markers",
    "queues-faults": "queue depth of the faulted element's switch ports in the fault window, fault markers",
    "neighbours-faults": "throughput of the NICs on the faulted element's switches, flow slowdowns and "
                         "packets lost or resent over time, in the fault window",
    "pfc-pauses-faults": "PFC pause intervals in the fault window, fault markers",
}
NAMES = (*SHARED, *PER_RUN)

#: the results tables each figure draws from (besides the small ones every figure may read: CONTEXT)
NEEDS = {"sweep": set(), "fct-cdf": {"flows"}, "fct-slowdown-cdf": {"flows"}, "latency-cdf": {"latency"},
         "ttft-cdf": {"requests"}, "tpot-cdf": {"requests"}, "queues": {"queues"}, "queue-heatmap": {"queues"},
         "pfc-pauses": {"pauses"}, "credit-stalls": {"stalls"}, "iterations": {"ops"}, "requests": {"requests"},
         "iteration-faults": set(), "queues-faults": {"queues", "flows"}, "neighbours-faults": {"flows", "losses"},
         "pfc-pauses-faults": {"pauses", "flows"}}
#: small tables read for any figure: port names, iteration marks, fault markers, the fabric
CONTEXT = frozenset({"ports", "iterations", "faults", "pfc_watchdog", "nodes", "links", "hosts", "placement"})


def tables_for(names) -> set[str] | None:
    """The tables the figures ``names`` need (None: every table, for every figure when ``names`` is empty)."""
    if not names:
        return None
    return set(CONTEXT).union(*(NEEDS[n] for n in names))
