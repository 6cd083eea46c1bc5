"""16,384 GPUs, LLaMA-2 7B TP8 x PP4 x DP512 on a rail-optimized 400 Gbps fabric: what one iteration costs.

Times every phase of the pipeline a ``cosim run`` of this workload goes through, in this process, and
prints its wall seconds, CPU seconds (user + system) and the process's peak RSS after it (ru_maxrss, so
monotonic): the trace (``build_trace``), the fabric (``build_fabric``: 2,048 servers x 8 NICs, 8 rails
of 2,048 hosts), the lowering (``lower``, called directly: the DAG is above training.MAX_DAG_OPS, which
``cosim run`` refuses), rank placement, the packet-hop estimate (with ``--parts`` also the independent
parts of the traffic, cosim.runs.decompose), and the engine's fabric build (``engine.check_fabric``: nodes, links, routes and the default per-class buffers
and lossless mask). It then says whether the whole run would fit: the simulation needs the data
packet-hops estimate times the cost per packet-hop (``--ns-per-hop``; 600 ns is the figure measured at
1,024 GPUs) of CPU time on one core. ``--simulate`` runs it as well (hours on this machine).

Targets (issue 15): one iteration <= 30 min and <= 16 GB here. The machine is shared: wall clock is noisy.

    python bench/bench_scale16k.py                       # 8 micro-batches per replica
    python bench/bench_scale16k.py --dp 32 --microbatches 4   # the 1,024-GPU case, same phases
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np


def cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Phases:
    """Prints one line per phase: wall s, CPU s, peak RSS after it, and what it made."""

    def __init__(self) -> None:
        print(f"{'phase':24s} {'wall s':>8s} {'cpu s':>8s} {'peak RSS MB':>12s}  result")

    def run(self, name: str, fn, describe=lambda x: ""):
        t, c = time.perf_counter(), cpu_s()
        out = fn()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{name:24s} {time.perf_counter() - t:8.1f} {cpu_s() - c:8.1f} {rss:12.0f}  {describe(out)}", flush=True)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dp", type=int, default=512)
    ap.add_argument("--microbatches", type=int, default=8, help="micro-batches per data-parallel replica")
    ap.add_argument("--fabric", choices=("roce", "ib"), default="roce")
    ap.add_argument("--ns-per-hop", type=float, default=600.0, help="simulation CPU ns per data packet-hop")
    ap.add_argument("--simulate", action="store_true", help="also run the simulation (hours)")
    ap.add_argument("--parts", action="store_true", help="also find the independent parts of the traffic "
                    "(cosim.runs.decompose; its time grows as host pairs x flows: hours at 16,384 GPUs)")
    args = ap.parse_args()

    from cosim import engine  # noqa: PLC0415
    from cosim.collectives import DagOpKind, lower  # noqa: PLC0415
    from cosim.network.transport import run_attributes  # noqa: PLC0415
    from cosim.runs import time_limit, training  # noqa: PLC0415
    from cosim.runs.decompose import describe_parts  # noqa: PLC0415
    from cosim.runs.experiment import from_document  # noqa: PLC0415
    from cosim.runs.run import data_packet_hops_estimate  # noqa: PLC0415

    doc = {"name": args.fabric,
           "network": {"transport": args.fabric, "topology": "rail-optimized", "link_gbps": 400.0,
                       "link_delay_ns": 1000.0},
           "workload": {"kind": "training", "model": "llama2-7b",
                        "parallelism": {"tp": 8, "pp": 4, "dp": args.dp, "micro_batch_size": 1,
                                        "global_batch_size": args.microbatches * args.dp}},
           "telemetry": {"queue_sample_interval_ns": 100_000.0}}
    exp = from_document(doc)[0]
    ph = Phases()
    engine_load = ph.run("load engine", engine.load)
    del engine_load
    trace = ph.run("trace", lambda: exp.workload.generate_trace(8),
                   lambda t: f"{t.n_ranks} ranks, {t.n_ops} ops")
    fabric = ph.run("fabric (python)", lambda: training.build_fabric(exp, trace.n_ranks, 8),
                    lambda f: f"{f.n_hosts} hosts, {f.n_switches} switches, {f.n_links} links")
    tuning = training.tuning_model(exp, trace)
    dag = ph.run("lower", lambda: lower(trace, gpus_per_server=8, chunk_bytes=exp.workload.chunk_bytes,
                                        algorithm=exp.workload.algorithm, tuning=tuning),
                 lambda d: f"{d.n_ops} DAG ops, {d.dep_idx.size} deps")

    def place():
        host_of = training.rank_hosts(fabric, trace.n_ranks, 8)
        flow = np.flatnonzero(dag.kind == DagOpKind.FLOW)
        return host_of[dag.src[flow]], host_of[dag.dst[flow]], dag.bytes[flow]

    src, dst, size = ph.run("place ranks", place, lambda x: f"{x[0].size} flows, {int(x[2].sum(dtype=np.int64))} B")
    attributes = run_attributes(exp.network, exp.seed, lossless_mask=exp.lossless_priority_mask())
    mtu = int(engine.attribute_values(attributes, ("HostNic::MtuBytes",))["HostNic::MtuBytes"])
    hops = ph.run("packet-hop estimate", lambda: data_packet_hops_estimate(fabric, src, dst, size, mtu),
                  lambda h: f"{h:.3g} data packet-hops")
    if args.parts:
        ph.run("independent parts", lambda: describe_parts(fabric, src, dst),
               lambda d: f"{d['independent_parts']} parts, up to {d['switches_per_part_max']} switches each")
    ph.run("engine fabric build", lambda: engine.check_fabric(fabric, attributes), lambda _: "routes, buffers")
    limit = time_limit.limit_ns(time_limit.dag_ideal_ns(dag, training.nic_payload_bytes_per_s(exp.network)))
    sim_cpu_s = hops * args.ns_per_hop * 1e-9
    print(f"\nwhole run: {dag.n_ops} DAG ops (cosim run refuses above {training.MAX_DAG_OPS}), {src.size} flows, "
          f"{hops:.3g} data packet-hops; simulation ~{sim_cpu_s:.0f} CPU s on one core at {args.ns_per_hop:g} ns "
          f"per packet-hop (target 1800 s); derived time limit {limit / 1e9:.3g} s simulated")
    if args.simulate:
        host_of = training.rank_hosts(fabric, trace.n_ranks, 8)
        flow = dag.kind == DagOpKind.FLOW
        src_node = np.where(flow, host_of[np.maximum(dag.src, 0)], -1).astype(np.int32)
        dst_node = np.where(flow, host_of[np.maximum(dag.dst, 0)], -1).astype(np.int32)
        out = ph.run("simulate", lambda: engine.simulate_dag(
            fabric, kind=dag.kind, gpu=dag.rank, src_node=src_node, dst_node=dst_node, bytes_=dag.bytes,
            duration_ns=dag.duration_ns, priority=dag.priority, dep_ptr=dag.dep_ptr, dep_idx=dag.dep_idx,
            seed=exp.seed, attributes=attributes, queue_sample_interval_ns=100_000.0, max_sim_time_ns=limit),
            lambda o: f"{o.network.status}, {o.network.packet_hops} packet-hops")
        del out


if __name__ == "__main__":
    main()
