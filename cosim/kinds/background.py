"""Background kinds of a shared fabric and their traffic as flow arrays: storage requests, checkpoint bursts, and synthetic
datacenter traffic drawn from a flow-size distribution at an offered load.

Pure functions: a workload spec (cosim.spec), the host ids it runs on and their link rates, and
a numpy Generator in; :class:`JobFlows` (src, dst, size, start relative to the workload's start)
out. Offered load is payload: a load ρ on a host of link rate C starts flows of mean size E[S] at
rate λ = ρ·C / (8·E[S]) per second, so on average ρ·C of payload per second leaves it (framing comes on
top of it on the wire).

Flow-size distributions are piecewise-linear CDFs over bytes, sampled by inverting the CDF with linear
interpolation between its points. The built-in ones are the two that datacenter transport papers use:

- ``web-search``: the DCTCP web-search workload (Alizadeh et al., SIGCOMM 2010), 10 KB .. 30 MB, mean
  about 1.6 MB; half the bytes are in flows above 5 MB.
- ``data-mining``: the VL2 data-mining workload (Greenberg et al., SIGCOMM 2009), 100 B .. 1 GB: most
  flows are a few KB, almost all bytes are in flows above 100 MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim import memory
from cosim.errors import CosimInputError
from cosim.kinds.base import register
from cosim.kinds.flows import FlowLevelKind, JobFlows, job_flows

#: name -> (size_bytes, cumulative probability) points of the built-in flow-size distributions
DISTRIBUTIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "web-search": ((0, 10e3, 20e3, 30e3, 50e3, 80e3, 200e3, 1e6, 2e6, 5e6, 10e6, 30e6),
                   (0, 0.15, 0.2, 0.3, 0.4, 0.53, 0.6, 0.7, 0.8, 0.9, 0.97, 1.0)),
    "data-mining": ((100, 180, 250, 560, 900, 1100, 1870, 3160, 10e3, 100e3, 400e3, 1.85e6, 10e6, 30e6, 100e6,
                     250e6, 1e9),
                    (0, 0.085, 0.14, 0.33, 0.47, 0.55, 0.65, 0.7, 0.8, 0.874, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995,
                     1.0)),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeCdf:
    """A flow-size distribution: sizes (bytes, ascending) and their cumulative probabilities (0 .. 1)."""

    size_bytes: np.ndarray  # float64 [k], non-decreasing
    cdf: np.ndarray  # float64 [k], non-decreasing, from >= 0 to 1

    @property
    def mean_bytes(self) -> float:
        """Mean flow size of the piecewise-linear CDF (each segment uniform between its ends)."""
        mid = (self.size_bytes[1:] + self.size_bytes[:-1]) / 2
        first = self.size_bytes[0] * self.cdf[0]  # mass at the smallest size
        return float(first + np.sum(np.diff(self.cdf) * mid))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """int64 [n]: sizes drawn by inverting the CDF (at least 1 byte)."""
        u = rng.random(n)
        return np.maximum(np.rint(np.interp(u, self.cdf, self.size_bytes)), 1).astype(np.int64)


def size_cdf(points_size: np.ndarray, points_cdf: np.ndarray, where: str) -> SizeCdf:
    """A checked SizeCdf: sizes >= 0 and non-decreasing, probabilities non-decreasing and ending at 1 (a
    last value of 100 means percent)."""
    size = np.asarray(points_size, np.float64)
    cdf = np.asarray(points_cdf, np.float64)
    if size.size < 2 or size.size != cdf.size:
        raise CosimInputError(where, "a flow-size CDF needs at least two (size, probability) points")
    if not (np.isfinite(size).all() and np.isfinite(cdf).all()):
        raise CosimInputError(where, "sizes and probabilities must be finite numbers")
    if cdf[-1] == 100:
        cdf = cdf / 100
    if (size < 0).any() or (np.diff(size) < 0).any():
        raise CosimInputError(where, "sizes must be >= 0 and non-decreasing")
    if (cdf < 0).any() or (np.diff(cdf) < 0).any() or cdf[-1] != 1:
        raise CosimInputError(where, "probabilities must be non-decreasing and end at 1 (or 100)")
    if size[-1] < 1:
        raise CosimInputError(where, "the largest flow must be at least 1 byte")
    return SizeCdf(size_bytes=size, cdf=cdf)


def read_cdf(path: str | Path) -> SizeCdf:
    """A flow-size CDF file: one ``size_bytes probability`` pair per line (spaces, tabs or a comma
    between; ``#`` starts a comment), probabilities in 0..1 or in percent."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CosimInputError(where, f"cannot read the CDF file ({type(exc).__name__})",
                              "give a text file of 'size_bytes probability' lines") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            rows.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise CosimInputError(f"{where}:{number}", f"{line!r} is not 'size_bytes probability'") from None
    if not rows:
        raise CosimInputError(where, "the CDF file has no points")
    size, cdf = np.array(rows).T
    return size_cdf(size, cdf, where)


def distribution(name: str | None, cdf_file: str | None) -> SizeCdf:
    """The SizeCdf of a built-in distribution, or of a CDF file."""
    if cdf_file is not None:
        return read_cdf(cdf_file)
    size, cdf = DISTRIBUTIONS[name]
    return size_cdf(np.array(size), np.array(cdf), f"distribution {name}")


def poisson_starts(rng: np.random.Generator, rate_per_ns: np.ndarray, duration_ns: float) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """(source index, start time ns) of Poisson arrivals in [0, duration_ns) for sources of the given rates."""
    rate = np.asarray(rate_per_ns, np.float64)
    memory.check_plan_fits(float(rate.sum()) * duration_ns, "workload.duration_ns",
                           "shorten duration_ns, or lower load")  # before the draw asks for the memory
    counts = rng.poisson(rate * duration_ns)
    who = np.repeat(np.arange(rate.size, dtype=np.int64), counts)
    # given their count, Poisson arrivals in a window are uniform in it
    return who, rng.random(who.size) * duration_ns


def synthetic(work, hosts: np.ndarray, link_gbps: np.ndarray, rng: np.random.Generator) -> JobFlows:
    """Every host of ``hosts`` starts flows to a uniformly random other host of ``hosts`` (Poisson, at
    ``work.load`` of its link rate ``link_gbps``), sizes from the workload's distribution."""
    hosts = np.asarray(hosts, np.int64)
    if hosts.size < 2:
        raise CosimInputError("workload.hosts", "synthetic traffic needs at least 2 hosts",
                              "give it more servers or hosts")
    cdf = distribution(work.distribution, work.cdf_file)
    rate = work.load * np.asarray(link_gbps, np.float64) / 8 / cdf.mean_bytes  # flows per ns (Gbit/s = bit/ns)
    who, start = poisson_starts(rng, rate, work.duration_ns)
    other = rng.integers(0, hosts.size - 1, who.size)
    dst = np.where(other >= who, other + 1, other)  # uniform over the hosts but the source
    return job_flows(hosts[who], hosts[dst], cdf.sample(rng, who.size), start)


def storage(work, targets: np.ndarray, clients: np.ndarray, link_gbps: np.ndarray,
            rng: np.random.Generator) -> JobFlows:
    """Requests of ``work.request_bytes`` between random clients and random storage targets: Poisson
    arrivals at ``work.load`` of the targets' summed link rate, a read (target → client) with probability
    ``work.read_fraction``, else a write (client → target)."""
    targets, clients = np.asarray(targets, np.int64), np.asarray(clients, np.int64)
    if not clients.size:
        raise CosimInputError("workload.clients", "the storage workload has no client hosts",
                              "name workloads with hosts in clients")
    rate = work.load * float(np.sum(link_gbps)) / 8 / work.request_bytes
    _, start = poisson_starts(rng, np.array([rate]), work.duration_ns)
    n = start.size
    target = targets[rng.integers(0, targets.size, n)]
    client = clients[rng.integers(0, clients.size, n)]
    read = rng.random(n) < work.read_fraction
    return job_flows(np.where(read, target, client), np.where(read, client, target),
                  np.full(n, work.request_bytes, np.int64), start)


def checkpoint(work, targets: np.ndarray, writers: np.ndarray) -> JobFlows:
    """Burst k at k·period: writer i sends ``bytes_per_host`` to target i mod (number of targets)."""
    targets, writers = np.asarray(targets, np.int64), np.asarray(writers, np.int64)
    if not writers.size:
        raise CosimInputError("workload.writers", "the checkpoint has no writer hosts",
                              "name workloads with hosts in writers")
    memory.check_plan_fits(float(work.bursts) * writers.size, "workload.bursts", "give fewer bursts")
    k = np.arange(work.bursts, dtype=np.float64)
    src = np.tile(writers, work.bursts)
    dst = np.tile(targets[np.arange(writers.size) % targets.size], work.bursts)
    start = np.repeat(k * work.period_ns, writers.size)
    return job_flows(src, dst, np.full(src.size, work.bytes_per_host, np.int64), start)


# --- the kind -----------------------------------------------------------------------------------------------

class BackgroundKind(FlowLevelKind):
    """Background traffic: its errors name the job's fields, its draws a stream of (seed, job index)."""

    def flows(self, job, hosts, ctx):
        rng = np.random.default_rng([ctx.experiment.seed, ctx.index_of[job.name]])
        try:
            return self.draw(job.work, hosts, ctx, rng)
        except CosimInputError as exc:
            where = f"workloads.{job.name}"
            field = exc.field.replace("workload", where, 1) if exc.field.startswith("workload") else exc.field
            raise CosimInputError(field, exc.problem, exc.fix) from None

    def draw(self, work, hosts, ctx, rng):
        """The flows of ``work`` on ``hosts``."""
        raise NotImplementedError


def _peers(ctx, refs, kinds) -> np.ndarray:
    """The hosts of the jobs ``refs`` (default: every job of ``kinds``)."""
    refs = refs or tuple(j.name for j in ctx.others if j.kind in kinds)
    return np.concatenate([ctx.slots[r] for r in refs]) if refs else np.zeros(0, np.int64)


@register
class SyntheticKind(BackgroundKind):
    """Poisson flows among the job's own hosts, sizes from a distribution."""

    name = "synthetic"

    def draw(self, work, hosts, ctx, rng):
        return synthetic(work, hosts, ctx.link_gbps[hosts], rng)


@register
class StorageKind(BackgroundKind):
    """The job's hosts are storage targets; its clients' hosts read and write."""

    name = "storage"

    def draw(self, work, hosts, ctx, rng):
        return storage(work, hosts, _peers(ctx, work.clients, ("training", "flows")),
                                  ctx.link_gbps[hosts], rng)


@register
class CheckpointKind(BackgroundKind):
    """Bursts from the writers' hosts to the job's hosts."""

    name = "checkpoint"

    def draw(self, work, hosts, ctx, rng):
        return checkpoint(work, hosts, _peers(ctx, work.writers, ("training",)))
