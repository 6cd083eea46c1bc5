"""One packet-path run for callgrind: ``bench_packet_path.scenario()`` simulated once on one transport.

    valgrind --tool=callgrind --collect-atstart=no "--toggle-collect=cosim::Engine::RunUntil*" \\
        python bench/callgrind_packet_path.py roce      # or ib

Instructions per data packet-hop = callgrind's total (Ir) / the data packet-hops this script prints.

``--hosts N`` runs the same traffic pattern on a bigger leaf-spine instead (4 hosts per leaf, 4 spines,
400 Gbps, 1 us links; host i sends ``--flow-bytes`` to host i+1, plus a 15-to-1 incast of a quarter of
that among the first 16 hosts), to compare the cost per data packet-hop at 16 and 1,024 hosts.
``--scheduler`` picks the ns-3 event scheduler (default: the engine's).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_packet_path import scenario  # noqa: E402

from cosim import engine  # noqa: E402
from cosim.network import topology  # noqa: E402
from cosim.network.transport import transport_attributes  # noqa: E402
from cosim.workload import flows as fl  # noqa: E402


def sized_scenario(hosts: int, flow_bytes: int):
    """The packet-path pattern on ``hosts`` hosts: the fabric and the flows."""
    fabric = topology.leaf_spine(hosts=hosts, hosts_per_leaf=4, spines=4, host_link_gbps=400.0,
                                 host_link_delay_ns=1000.0, fabric_link_delay_ns=1000.0)
    ids = fabric.host_ids
    perm = fl.permutation(ids, size_bytes=flow_bytes)
    inc = fl.incast(ids[:16], size_bytes=flow_bytes // 4)
    flows = fl.FlowSet.from_arrays(np.concatenate([perm.src, inc.src]), np.concatenate([perm.dst, inc.dst]),
                                   np.concatenate([perm.size_bytes, inc.size_bytes]))
    return fabric, flows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transport", nargs="?", choices=["roce", "ib"], default="roce")
    ap.add_argument("--hosts", type=int, default=None,
                    help="hosts of the sized scenario (default: bench_packet_path.scenario(), 16 hosts)")
    ap.add_argument("--flow-bytes", type=int, default=4_000_000,
                    help="permutation flow size of --hosts, in bytes (4 MB: --hosts 16 is scenario()'s traffic)")
    ap.add_argument("--buffer-bytes", type=int, default=None,
                    help="SharedBufferMmu::BufferBytes (a spine of 256 ports at 400 Gbps needs more than the "
                         "default for its PFC headroom)")
    ap.add_argument("--scheduler", default=engine.SCHEDULER_TYPE, help="ns-3 scheduler type")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="an ns-3 attribute, e.g. TimingWheelScheduler::BucketWidth=4096ps (repeatable)")
    args = ap.parse_args()
    fabric, flows = scenario() if args.hosts is None else sized_scenario(args.hosts, args.flow_bytes)
    attributes = transport_attributes(args.transport)
    if args.buffer_bytes is not None:
        attributes = {**attributes, "SharedBufferMmu::BufferBytes": str(args.buffer_bytes)}
    attributes = {**attributes, **dict(item.split("=", 1) for item in args.set)}
    out = engine.simulate(fabric, flows, seed=1, attributes=attributes, scheduler=args.scheduler)
    print(f"{args.transport}: {out.status}, {out.data_packet_hops} data packet-hops, {out.events} events, "
          f"{args.scheduler}, {fabric.n_nodes} nodes, {flows.n_flows} flows")


if __name__ == "__main__":
    main()
