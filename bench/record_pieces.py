"""Two pieces of a large run's record, timed in one process (CPU s): ideal FCTs with and without a path cache
over the 16,384-GPU Llama-3-405B job's pairs, and the deflate levels of a results file's chunked columns.

    python bench/record_pieces.py paths --repeat 3
    python bench/record_pieces.py deflate ff.h5 --repeat 3

``paths``: 4,194,304 flows drawn at random (fixed seed) over the ring and pipeline pairs of
``bench/llama3-405b-16k.toml`` that cross servers, three sizes; T_ideal of them with one PathCache kept from
call to call (its first call walks every pair) and without one, alternately, checking both give the same
values. ``deflate``: the first 1 M rows of every chunked one-dimensional column of the file's runs, cut into
its chunks and shuffled as HDF5 stores them, deflated by zlib at levels 1, 3 and 4 alternately; the
deflated bytes as a share of the raw ones.
"""

from __future__ import annotations

import argparse
import statistics
import time
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def paths(repeat: int) -> None:
    from cosim.network import ideal  # noqa: PLC0415
    from cosim.plan import _place, estimate, fabric_for, jobs_of, sizes  # noqa: PLC0415
    from cosim.run import experiments_of  # noqa: PLC0415

    exp = experiments_of(str(HERE / "llama3-405b-16k.toml"))[0]
    layout = sizes.plan_size(exp)["layout"]
    jobs = jobs_of(exp)
    fabric = fabric_for(exp, jobs, [layout.n_ranks], 8)
    hosts = np.asarray(_place(exp, fabric, jobs, [layout.n_ranks], 8)[jobs[0].name], np.int64)
    peers = [estimate._ring_successor(layout, int(g)) for g in np.unique(layout.group_kind)]
    peers += [layout.peer_of[:, k].astype(np.int64) for k in range(layout.peer_of.shape[1])]
    src = np.concatenate([hosts[np.flatnonzero(p >= 0)] for p in peers])
    dst = np.concatenate([hosts[p[p >= 0]] for p in peers])
    across = fabric.host_server[src] != fabric.host_server[dst]
    src, dst = src[across], dst[across]
    rng = np.random.default_rng(0)
    pick = rng.integers(0, src.size, 1 << 22)
    size = rng.choice([4 << 20, 1 << 20, 123456], pick.size)
    print(f"{np.unique(src * fabric.n_nodes + dst).size} pairs, {pick.size} flows")
    cache = ideal.PathCache(fabric)
    times: dict[str, list[float]] = {"cache": [], "none": []}
    for i in range(repeat + 1):
        values = {}
        for name, kept in (("cache", cache), ("none", None)):
            t = time.process_time()
            values[name] = ideal.ideal_fct_ns(fabric, src[pick], dst[pick], size, mtu_bytes=4096, header_bytes=82,
                                              paths=kept)
            times[name].append(time.process_time() - t)
        assert np.array_equal(values["cache"], values["none"])
        print(f"  {'first' if i == 0 else f'pair {i}'}: cache {times['cache'][-1]:.2f} CPU s, none "
              f"{times['none'][-1]:.2f} CPU s", flush=True)
    print(f"median after the first: cache {statistics.median(times['cache'][1:]):.2f}, none "
          f"{statistics.median(times['none'][1:]):.2f} CPU s")


def deflate(path: str, repeat: int) -> None:
    import h5py  # noqa: PLC0415

    chunks = []

    def take(_, obj):
        if isinstance(obj, h5py.Dataset) and obj.chunks and obj.ndim == 1 and obj.size > 1 << 20:
            x, rows = obj[:1 << 20], obj.chunks[0]
            for lo in range(0, x.size - rows + 1, rows):
                part = x[lo:lo + rows]
                chunks.append(np.ascontiguousarray(part.view(np.uint8).reshape(rows, x.dtype.itemsize).T).tobytes())

    with h5py.File(path, "r") as f:
        f.visititems(take)
    raw = sum(map(len, chunks))
    cpu: dict[int, list[float]] = {1: [], 3: [], 4: []}
    out = {}
    for _ in range(repeat):
        for level in cpu:
            t = time.process_time()
            out[level] = sum(len(zlib.compress(c, level)) for c in chunks)
            cpu[level].append(time.process_time() - t)
    print(f"{raw / 1e6:.1f} MB raw in {len(chunks)} chunks")
    for level, t in cpu.items():
        print(f"level {level}: {statistics.median(t):.3f} CPU s (median of {repeat}), {100 * out[level] / raw:.2f} % "
              "of raw")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("piece", choices=("paths", "deflate"))
    parser.add_argument("file", nargs="?", help="(deflate) a results file")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.piece == "deflate" and not args.file:
        parser.error("deflate needs a results file")
    paths(args.repeat) if args.piece == "paths" else deflate(args.file, args.repeat)


if __name__ == "__main__":
    main()
