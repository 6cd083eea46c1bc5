"""Ideal FCTs of a permutation on a large fat tree: wall time of cosim.network.ideal.ideal_fct_ns.

Usage: python bench/bench_ideal_fct.py [--k 40] [--flow-bytes 4096] [--reference PATH --reference-sources N]

``--reference`` times another module's ``ideal_fct_ns`` (e.g. the previous version, from
``git show REV:cosim/network/ideal.py > old_ideal.py``) on the flows of the first N sources only, and scales
that time to every source (the per-source tree costs the same for each source), in the same run.
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np

from cosim.network import topology
from cosim.network.ideal import ideal_fct_ns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=40, help="fat-tree radix (k³/4 hosts: 40 → 16,000)")
    ap.add_argument("--flow-bytes", type=int, default=4096, help="payload of each flow, bytes")
    ap.add_argument("--reference", default=None, help="a module file whose ideal_fct_ns to time as well")
    ap.add_argument("--reference-sources", type=int, default=500, help="sources the reference is timed on")
    args = ap.parse_args()
    fabric = topology.fat_tree(k=args.k, link_gbps=400.0, link_delay_ns=1000.0)
    hosts = fabric.host_ids.astype(np.int64)
    src, dst = hosts, np.roll(hosts, -1)  # permutation: host i to host i + 1
    size = np.full(src.size, args.flow_bytes, np.int64)
    t0 = time.perf_counter()
    ideal = ideal_fct_ns(fabric, src, dst, size, mtu_bytes=4096, header_bytes=60)
    wall = time.perf_counter() - t0
    print(f"fat tree k={args.k}: {hosts.size} hosts, {fabric.n_links} links, {src.size} flows")
    print(f"ideal_fct_ns: {wall:.3f} s (median ideal {np.median(ideal):.1f} ns)")
    if args.reference:
        spec = importlib.util.spec_from_file_location("reference_ideal", args.reference)
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        n = min(args.reference_sources, src.size)
        t0 = time.perf_counter()
        old = ref.ideal_fct_ns(fabric, src[:n], dst[:n], size[:n], mtu_bytes=4096, header_bytes=60)
        ref_wall = time.perf_counter() - t0
        assert np.array_equal(old, ideal[:n]), "the reference's ideal FCTs differ"
        print(f"reference on {n} sources: {ref_wall:.3f} s, scaled to {src.size}: {ref_wall * src.size / n:.1f} s "
              f"(identical values on those flows)")


if __name__ == "__main__":
    main()
