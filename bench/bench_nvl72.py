"""NVL72 scale-up domains: all-reduce inside one rack (NVLS against the ring, against the NVLink bound) and an
all-to-all inside one rack against one across two, co-simulated.

Every figure is a simulated time (bit for bit reproducible), printed beside its bound: S / NVLink rate for
NVLS and 2(n−1)/n · S / NVLink rate for the ring (the datasheet's 900 GB/s per direction), and for the
EP all-to-all (n−1)/n · S over NVLink inside one rack (EP72) and S/2 through one NIC per GPU across two
(EP144: half of every GPU's buffer is bound for the other rack). The wall time of each point is one noisy run.

    python bench/bench_nvl72.py
    python bench/bench_nvl72.py --gpu gb300-nvl72 --link-gbps 800 --sizes 64MiB,1GiB
"""

from __future__ import annotations

import argparse
import time

from cosim.sweep.collective import CollectiveSweep, parse_sizes, run_point
from cosim.workload.hardware import get_hardware


def all_reduce_rows(gpu: str, sizes: tuple[int, ...], link_gbps: float) -> list[str]:
    """One line per size: NVLS and ring times inside one domain, their bounds and NVLS's speed-up."""
    hw = get_hardware(gpu)
    n, rate = hw.gpus_per_host, hw.nvlink_bytes_per_s
    rows = [f"all-reduce on the {n} GPUs of one {gpu} domain",
            f"{'size (B)':>12} {'nvls (us)':>10} {'bound':>8} {'ring (us)':>10} {'bound':>8} {'speed-up':>9} "
            f"{'wall (s)':>9}"]
    for size in sizes:
        times, wall = {}, time.perf_counter()
        for algorithm in ("nvls", "ring"):
            sweep = CollectiveSweep(op="all_reduce", sizes_bytes=(size,), n_ranks=n, gpu=gpu,
                                    algorithm=algorithm, link_gbps=link_gbps)
            times[algorithm] = run_point(sweep, "roce", size)[0].time_us
        wall = time.perf_counter() - wall
        rows.append(f"{size:>12} {times['nvls']:>10.2f} {size / rate * 1e6:>8.2f} {times['ring']:>10.2f} "
                    f"{2 * (n - 1) / n * size / rate * 1e6:>8.2f} {times['ring'] / times['nvls']:>9.2f} "
                    f"{wall:>9.2f}")
    return rows


def all_to_all_rows(gpu: str, sizes: tuple[int, ...], link_gbps: float) -> list[str]:
    """One line per size: an EP all-to-all inside one domain (bound: each GPU sends (g−1)/g · S over NVLink)
    and across two (bound: each GPU's NIC carries the half of S bound for the other domain)."""
    hw = get_hardware(gpu)
    g = hw.gpus_per_host
    nic = min(hw.nic_bytes_per_s, link_gbps * 1e9 / 8)
    rows = [f"all-to-all, {gpu}: one domain ({g} ranks) and two ({2 * g} ranks, {link_gbps:g} Gb/s fabric)",
            f"{'size (B)':>12} {'one (us)':>10} {'NVLink bound':>12} {'two (us)':>10} {'NIC bound':>10} "
            f"{'ratio':>7} {'wall (s)':>9}"]
    for size in sizes:
        times, wall = {}, time.perf_counter()
        for ranks in (g, 2 * g):
            sweep = CollectiveSweep(op="all_to_all", sizes_bytes=(size,), n_ranks=ranks, gpu=gpu,
                                    link_gbps=link_gbps)
            times[ranks] = run_point(sweep, "roce", size)[0].time_us
        wall = time.perf_counter() - wall
        rows.append(f"{size:>12} {times[g]:>10.2f} {(g - 1) / g * size / hw.nvlink_bytes_per_s * 1e6:>12.2f} "
                    f"{times[2 * g]:>10.2f} {size / 2 / nic * 1e6:>10.2f} {times[2 * g] / times[g]:>7.2f} "
                    f"{wall:>9.2f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="gb200-nvl72", help="GPU preset with a multi-server NVLink domain")
    parser.add_argument("--sizes", default="1MiB..256MiB:4", help="sizes, as cosim collective --sizes")
    parser.add_argument("--link-gbps", type=float, default=400.0, help="fabric link rate, Gb/s")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    print("\n".join(all_reduce_rows(args.gpu, sizes, args.link_gbps)))
    print()
    print("\n".join(all_to_all_rows(args.gpu, tuple(s for s in sizes if s <= 64 << 20) or sizes[:1],
                                    args.link_gbps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
