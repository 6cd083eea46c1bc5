"""Fabric build time: create nodes, links and ECMP routes of a large fabric in the real engine, no traffic.

Builds each fabric ``--repeat`` times in this process (``cosim.engine.check_fabric``: nodes, links, routes,
buffers, then destroy) and prints the median wall and CPU seconds with their spread. Target (issue 15):
a 16,384-host fat-tree-class fabric built in <= 5 s on this 2-core machine.

    python bench/bench_build.py [--repeat 3] [--k 40] [--servers 2048]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cosim import engine
from cosim.network import topology

#: a shared buffer large enough for headroom on every port of the widest switch (the build, not buffer sizing,
#: is what is timed)
BUFFERS = {"SharedBufferMmu::BufferBytes": str(64 << 30)}


def fabrics(k: int, servers: int) -> list[tuple[str, topology.Fabric]]:
    """The fabrics timed: a k-ary fat tree and a rail-optimized cluster of 8-GPU servers."""
    return [
        (f"fat-tree k={k}", topology.fat_tree(k=k, link_gbps=400.0, link_delay_ns=1000.0)),
        (f"rail-optimized {servers}x8, 64 spines",
         topology.rail_optimized(servers=servers, spines=64, host_link_gbps=400.0, host_link_delay_ns=1000.0,
                                 fabric_link_delay_ns=1000.0)),
    ]


def time_build(fabric: topology.Fabric, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` builds of ``fabric`` in this process."""
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        engine.check_fabric(fabric, BUFFERS)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--k", type=int, default=40, help="fat-tree radix (k^3/4 hosts; 40 -> 16,000)")
    ap.add_argument("--servers", type=int, default=2048, help="rail-optimized servers of 8 GPUs")
    args = ap.parse_args()
    engine.load()
    print(f"{'fabric':36s} {'hosts':>6s} {'switches':>8s} {'links':>6s} {'wall s':>7s} {'cpu s':>6s} {'spread s':>9s}")
    for name, fab in fabrics(args.k, args.servers):
        wall, cpu = time_build(fab, args.repeat)
        hosts = int((fab.node_kind == topology.HOST).sum())
        print(f"{name:36s} {hosts:6d} {fab.n_nodes - hosts:8d} {fab.link_a.size:6d} {statistics.median(wall):7.2f} "
              f"{statistics.median(cpu):6.2f} {max(wall) - min(wall):9.2f}")


if __name__ == "__main__":
    main()
