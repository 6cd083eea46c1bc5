"""Refit the in-server NVLink coefficients of cosim.collectives.calibration from measured all-reduce times.

    python bench/fit_nvlink_all_reduce.py PATH/all_reduce.csv [--datasheet-gbps 450]

The CSV has vidur's profiling format (microsoft/vidur data/profiling/network/<gpu>_dgx/all_reduce.csv):
columns ``size`` (bytes), ``num_workers``, ``devices_per_node`` and ``time_stats.all_reduce.median``
(milliseconds); only rows with every worker on one node are used. Prints launch_ns, step_ns, the bus
bandwidth, its efficiency against the datasheet NVLink rate, and the fit's relative error per GPU count.
"""

from __future__ import annotations

import argparse
import csv

import numpy as np

from cosim.collectives.calibration import fit_all_reduce


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--datasheet-gbps", type=float, default=450.0, help="NVLink GB/s per GPU per direction")
    ap.add_argument("--min-size-bytes", type=int, default=2 << 20)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["num_workers"] == r["devices_per_node"]]
    size = np.array([int(r["size"]) for r in rows], np.float64)
    n = np.array([int(r["num_workers"]) for r in rows], np.float64)
    t_ns = np.array([float(r["time_stats.all_reduce.median"]) * 1e6 for r in rows])
    launch, step, bus = fit_all_reduce(size, n, t_ns, min_size_bytes=args.min_size_bytes)
    print(f"launch_ns={launch:.0f} step_ns={step:.0f} bus_bytes_per_s={bus:.4g} "
          f"efficiency={bus / (args.datasheet_gbps * 1e9):.4f}")
    model = launch + 2 * (n - 1) * step + 2 * (n - 1) / n * size / bus * 1e9
    for count in np.unique(n):
        m = (n == count) & (size >= 4 << 20)
        err = np.abs(model[m] / t_ns[m] - 1)
        print(f"  {int(count)} GPUs, 4-64 MiB: {m.sum()} points, |error| p50 {np.median(err):.3f} "
              f"p90 {np.percentile(err, 90):.3f} max {err.max():.3f}")


if __name__ == "__main__":
    main()
