"""Are two results files the same run? Every dataset and every summary value of their first runs, compared.

What measures the simulator itself (``events``, ``wall_time_s``, ``packet_hops_per_s``) is listed apart. When
one file keeps only the communication rows of the ops table (``telemetry.op_table = "collectives"``), the other's
ops table is compared on those rows. Exit status 1 when anything else differs.

    python bench/same_datasets.py /tmp/405b-1k.h5 /tmp/405b-1k-new.h5
"""

from __future__ import annotations

import argparse
import json
import sys

import h5py
import numpy as np

#: summary values that measure the simulator, not the network
SIMULATOR_COST = {"events", "wall_time_s", "packet_hops_per_s"}
COMPUTE = 0  # cosim.workload.trace.OpKind.COMPUTE


def _first_run(path: str) -> h5py.Group:
    runs = h5py.File(path, "r")["runs"]
    return runs[sorted(runs)[0]]


def _ops_rows(group: h5py.Group, keep_compute: bool) -> np.ndarray | slice:
    return slice(None) if keep_compute else np.asarray(group["kind"][()]) != COMPUTE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = _first_run(args.a), _first_run(args.b)
    same, differ = 0, []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            differ.append(f"{name} (in one file only)")
            continue
        ga, gb = a[name], b[name]
        rows_a = rows_b = slice(None)
        if name == "ops" and "kind" in ga and "kind" in gb and ga["kind"].shape != gb["kind"].shape:
            full = ga["kind"].shape[0] > gb["kind"].shape[0]
            rows_a, rows_b = _ops_rows(ga, not full), _ops_rows(gb, full)
        for column in sorted(set(ga) | set(gb)):
            if column not in ga or column not in gb:
                differ.append(f"{name}/{column} (in one file only)")
                continue
            x, y = ga[column][()], gb[column][()]
            if x.ndim == 1:
                x, y = x[rows_a], y[rows_b]
            floats = x.dtype.kind == "f"
            if x.shape == y.shape and np.array_equal(x, y, equal_nan=floats):
                same += 1
            else:
                differ.append(f"{name}/{column}")
    sa, sb = json.loads(a.attrs["summary"]), json.loads(b.attrs["summary"])
    keys = sorted(set(sa) | set(sb))
    summary = [k for k in keys if sa.get(k) != sb.get(k) and k not in SIMULATOR_COST]
    cost = {k: (sa.get(k), sb.get(k)) for k in keys if k in SIMULATOR_COST}
    print(f"datasets identical: {same}; differing: {', '.join(differ) or 'none'}")
    print(f"summary values differing: {', '.join(summary) or 'none'} (of {len(keys)})")
    for k, (x, y) in cost.items():
        print(f"  {k}: {x} -> {y}")
    sys.exit(1 if differ or summary else 0)


if __name__ == "__main__":
    main()
