"""What NCCL achieves over NVLink inside one server, fitted to measured all-reduce times, per GPU type.

Model
-----
NCCL's all-reduce of S bytes across n GPUs of one NVSwitch server (ring, whatever protocol NCCL picked)
takes

    T(S, n) = launch_ns + 2(n−1) · step_ns + 2(n−1)/n · S / bus_bytes_per_s

``launch_ns`` is the per-call cost (kernel launch, protocol setup, the timer's own overhead), ``step_ns``
the synchronisation cost of one ring step, ``bus_bytes_per_s`` the bus bandwidth NCCL sustains (nccl-tests'
busbw at large sizes). The bus bandwidth is stored as a fraction of the GPU's datasheet NVLink rate
(``efficiency``), so a hardware spec with another NVLink rate scales it.

Coefficients and provenance
---------------------------
Fitted with :func:`fit_all_reduce` (relative least squares, sizes ≥ 2 MiB, n ∈ {2, 4, 8} together) to the
median times of NCCL all-reduce inside one DGX in ``data/profiling/network/{a100_dgx,h100_dgx}/
all_reduce.csv`` of microsoft/vidur (commit 7d47513, MIT license), sizes 2 KiB to 64 MiB.
``bench/fit_nvlink_all_reduce.py`` refits them from files of that format and prints the fit's error:
relative error over the 4–64 MiB points, median / p90 by GPU count 2, 4, 8 — A100 1.4 / 5.9 %, 5.4 / 11 %,
6.8 / 13 % (NCCL changes protocol near 32 MiB on 8 A100s, which one line cannot follow); H100 7.9 / 11 %,
4.0 / 7.9 %, 3.6 / 7.6 %. H200 shares H100's NVLink 4 / NVSwitch generation and uses its coefficients;
an unknown GPU uses H100's too. This one line is what the tuner uses for the NVLink part of collectives
that span servers.

In-server all-reduce, per protocol
----------------------------------
NCCL picks a protocol by size — LL for small calls, LL128 in between, Simple for large ones — and each has
its own latency and bandwidth. Inside one server, an all-reduce of S bytes on n GPUs takes

    T(S, n) = latency_ns[p] + 2(n−1)/n · S / bus_bytes_per_s[p],   p = LL if S < ll128_from_bytes,
                                                                    LL128 if S < simple_from_bytes, else Simple

with one (latency, bus bandwidth) pair per protocol and the two switch sizes per GPU type and GPU count
(:class:`ProtocolLines`), fitted jointly by :func:`fit_protocol_lines` — least squares of the relative error
against the robust measured curve (:func:`robust_curve`) at sizes ≥ 64 KiB, the switch sizes searched on a
grid of 97 sizes a log step apart, every bandwidth at most the datasheet NVLink rate — to the same vidur
CSVs (n = 2, 4, 8 measured; another n uses the nearest measured count, the larger on a tie). Below about
1 MiB the measured medians sit on a 20–60 µs floor of launch and timer overhead that jumps from one size to
the next, so the LL and LL128 lines there follow that floor (their fitted bandwidths are not NCCL's
LL = ½, LL128 = 0.92 of Simple), while the Simple line is NCCL's large-message busbw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cosim.errors import CosimInputError


@dataclass(frozen=True, slots=True, kw_only=True)
class NvlinkCalibration:
    """Fitted in-server all-reduce coefficients of one GPU type (module docstring)."""

    gpu: str
    launch_ns: float  #: fixed cost of one collective call, ns
    step_ns: float  #: cost of one algorithm step over NVLink, ns
    efficiency: float  #: bus bandwidth NCCL sustains / the datasheet NVLink rate per direction
    datasheet_bytes_per_s: float  #: NVLink rate per GPU per direction the fit was made against, bytes/s


#: vidur a100_dgx / h100_dgx all_reduce.csv (commit 7d47513), fit_all_reduce(min_size_bytes=2 MiB)
CALIBRATIONS: dict[str, NvlinkCalibration] = {
    "a100": NvlinkCalibration(gpu="a100", launch_ns=40_200.0, step_ns=1_400.0, efficiency=170.1e9 / 300e9,
                              datasheet_bytes_per_s=300e9),
    "h100": NvlinkCalibration(gpu="h100", launch_ns=23_700.0, step_ns=520.0, efficiency=344.9e9 / 450e9,
                              datasheet_bytes_per_s=450e9),
}
_SAME_AS = {"h200": "h100"}
DEFAULT_GPU = "h100"

#: NVLink rate per GPU per direction when a trace names none (an H100's), bytes/s
DEFAULT_NVLINK_BYTES_PER_S = 450e9
#: fixed latency of one NVLink copy in the DAG executor when a trace names none, ns
DEFAULT_NVLINK_LATENCY_NS = 500.0


def calibration_for(gpu: str | None) -> NvlinkCalibration:
    """The coefficients of GPU type ``gpu`` (a hardware preset name, case-insensitive), H100's if unknown."""
    name = (gpu or DEFAULT_GPU).lower()
    name = _SAME_AS.get(name, name)
    return CALIBRATIONS.get(name, CALIBRATIONS[DEFAULT_GPU])


@dataclass(frozen=True, slots=True, kw_only=True)
class NvlinkModel:
    """The NVLink side of one run: what the DAG executor copies at and what NCCL adds per call and step.

    The executor copies at the fastest rate any fitted NCCL line reaches on this GPU (``copy_bytes_per_s``);
    what a call's protocol loses against it is extra copy time of its NVLink copies
    (:meth:`cosim.collectives.tuning.TuningModel.nvlink_extra_ns_per_byte`)."""

    gpu: str
    nvlink_bytes_per_s: float  #: datasheet NVLink rate per GPU per direction, bytes/s
    bus_bytes_per_s: float  #: rate NCCL sustains at large sizes (the one-line fit), bytes/s
    copy_bytes_per_s: float  #: the DAG executor's NVLink copy rate: the fastest fitted line's, bytes/s
    copy_latency_ns: float  #: fixed latency of one NVLink copy in the executor, ns
    launch_ns: float
    step_ns: float

    def __post_init__(self) -> None:
        for name in ("nvlink_bytes_per_s", "bus_bytes_per_s", "copy_bytes_per_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not np.isfinite(v):
                raise CosimInputError(f"nvlink.{name}", f"must be a positive number, got {v!r}")
        for name in ("copy_latency_ns", "launch_ns", "step_ns"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or not np.isfinite(v):
                raise CosimInputError(f"nvlink.{name}", f"must be a number >= 0, got {v!r}")

    def executor_attributes(self) -> dict[str, str]:
        """The ns-3 attributes of the DagExecutor for this model (its NVLink copy rate and latency)."""
        return {"DagExecutor::NvlinkDataRate": f"{round(self.copy_bytes_per_s * 8)}bps",
                "DagExecutor::NvlinkLatency": f"{round(self.copy_latency_ns)}ns"}


def nvlink_model(hardware: dict | None) -> NvlinkModel:
    """The NVLink model of a trace's ``hardware`` spec (its ``name``, ``nvlink_bytes_per_s`` and, if given,
    ``nvlink_latency_ns``); defaults for whatever is missing (an H100)."""
    hw = hardware or {}
    cal = calibration_for(hw.get("name"))
    rate = hw.get("nvlink_bytes_per_s", DEFAULT_NVLINK_BYTES_PER_S)
    latency = hw.get("nvlink_latency_ns", DEFAULT_NVLINK_LATENCY_NS)
    for field, value in (("nvlink_bytes_per_s", rate), ("nvlink_latency_ns", latency)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not np.isfinite(value):
            raise CosimInputError(f"trace hardware.{field}", f"must be a number >= 0, got {value!r}")
    if not rate > 0:
        raise CosimInputError("trace hardware.nvlink_bytes_per_s", "must be positive")
    return NvlinkModel(gpu=cal.gpu, nvlink_bytes_per_s=float(rate), bus_bytes_per_s=float(rate) * cal.efficiency,
                       copy_bytes_per_s=float(rate) * max_efficiency(cal.gpu), copy_latency_ns=float(latency),
                       launch_ns=cal.launch_ns, step_ns=cal.step_ns)


def all_reduce_ns(cal: NvlinkCalibration, size_bytes, n_ranks, nvlink_bytes_per_s: float | None = None):
    """T(S, n) of the module docstring, ns (numpy-broadcast over sizes and rank counts)."""
    s = np.asarray(size_bytes, np.float64)
    n = np.asarray(n_ranks, np.float64)
    bus = (nvlink_bytes_per_s or cal.datasheet_bytes_per_s) * cal.efficiency
    return cal.launch_ns + 2 * (n - 1) * cal.step_ns + 2 * (n - 1) / n * s / bus * 1e9


def fit_all_reduce(size_bytes, n_ranks, time_ns, *, min_size_bytes: int = 2 << 20) -> tuple[float, float, float]:
    """Fit (launch_ns, step_ns, bus_bytes_per_s) of T(S, n) to measured in-server all-reduce times.

    Relative least squares (every point weighs by its own size) over the points with S ≥ ``min_size_bytes``
    (below, the times are mostly launch jitter).
    """
    s = np.asarray(size_bytes, np.float64)
    n = np.asarray(n_ranks, np.float64)
    t = np.asarray(time_ns, np.float64)
    keep = (s >= min_size_bytes) & (n >= 2) & (t > 0)
    if np.count_nonzero(keep) < 3 or np.unique(n[keep]).size < 2:
        raise CosimInputError("calibration", "needs at least 3 points of 2 or more GPU counts above the minimum size")
    s, n, t = s[keep], n[keep], t[keep]
    a = np.stack([np.ones_like(s), 2 * (n - 1), 2 * (n - 1) / n * s], axis=1) / t[:, None]
    (launch, step, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if not inv_bw > 0:
        raise CosimInputError("calibration", "the fitted bandwidth is not positive (check the units: bytes, ns)")
    return float(launch), float(step), float(1e9 / inv_bw)


# --- in-server all-reduce, one line per NCCL protocol (module docstring) ---------------------------------

#: NCCL's protocols in the order it uses them as the size grows
PROTOCOL_NAMES = ("LL", "LL128", "Simple")
#: sizes in the window of the robust measured curve: the point and 9 neighbours on each side
ROBUST_WINDOW = 19


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolLines:
    """Fitted in-server all-reduce of one GPU type on ``n_ranks`` GPUs: NCCL's protocol by size, and one
    (latency, bus bandwidth) line per protocol (module docstring)."""

    gpu: str
    n_ranks: int
    ll128_from_bytes: int  #: smallest size NCCL runs with LL128, bytes
    simple_from_bytes: int  #: smallest size NCCL runs with Simple, bytes
    latency_ns: tuple[float, float, float]  #: per protocol (LL, LL128, Simple): fixed time of one call, ns
    efficiency: tuple[float, float, float]  #: per protocol: bus bandwidth / the datasheet NVLink rate
    datasheet_bytes_per_s: float  #: NVLink rate per GPU per direction the fit was made against, bytes/s

    def protocol(self, size_bytes):
        """Index into :data:`PROTOCOL_NAMES` of the protocol NCCL uses at ``size_bytes`` (numpy-broadcast)."""
        s = np.asarray(size_bytes)
        return (s >= self.ll128_from_bytes).astype(np.int64) + (s >= self.simple_from_bytes)

    def bus_bytes_per_s(self, size_bytes, nvlink_bytes_per_s: float | None = None):
        """Bus bandwidth of the protocol used at ``size_bytes`` on an NVLink of that rate, bytes/s."""
        rate = nvlink_bytes_per_s or self.datasheet_bytes_per_s
        return np.asarray(self.efficiency)[self.protocol(size_bytes)] * rate

    def time_ns(self, size_bytes, nvlink_bytes_per_s: float | None = None):
        """T(S, n) of the module docstring, ns (numpy-broadcast over sizes)."""
        s = np.asarray(size_bytes, np.float64)
        latency = np.asarray(self.latency_ns)[self.protocol(s)]
        n = self.n_ranks
        return latency + 2 * (n - 1) / n * s / self.bus_bytes_per_s(s, nvlink_bytes_per_s) * 1e9


def protocol_lines_for(gpu: str | None, n_ranks: int) -> ProtocolLines:
    """The fitted lines of GPU type ``gpu`` (as :func:`calibration_for`) for the measured GPU count nearest
    ``n_ranks`` (the larger on a tie)."""
    name = (gpu or DEFAULT_GPU).lower()
    name = _SAME_AS.get(name, name)
    table = PROTOCOL_LINES.get(name, PROTOCOL_LINES[DEFAULT_GPU])
    counts = np.array(sorted(table))
    return table[int(counts[np.lexsort((-counts, np.abs(counts - n_ranks)))[0]])]


def max_efficiency(gpu: str | None) -> float:
    """The largest bus bandwidth / datasheet rate of any fitted line (one-line or per protocol) of ``gpu``."""
    name = (gpu or DEFAULT_GPU).lower()
    name = _SAME_AS.get(name, name)
    table = PROTOCOL_LINES.get(name, PROTOCOL_LINES[DEFAULT_GPU])
    return max([calibration_for(gpu).efficiency] + [e for lines in table.values() for e in lines.efficiency])


def robust_curve(time_ns) -> np.ndarray:
    """The measured curve without the scatter of single sizes: at every point (sorted by size) the median of
    the :data:`ROBUST_WINDOW` points centred on it (near either end, of the part of that window there is:
    a shrinking window would leave the end points as scattered as they were)."""
    t = np.asarray(time_ns, np.float64)
    if t.size == 0:
        return t
    half = ROBUST_WINDOW // 2
    padded = np.pad(t, half, constant_values=np.nan)
    return np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, ROBUST_WINDOW), axis=1)


def _line_sums(bus_bytes, target_ns) -> np.ndarray:
    """Running sums for the relative least squares of ``latency + bus_bytes · u ≈ target`` over any run of
    consecutive points: row i holds the sums over points [0, i)."""
    w = 1.0 / target_ns
    x = bus_bytes
    cols = np.stack([w * w, x * w * w, x * x * w * w, w, x * w, np.ones_like(x)], axis=1)
    return np.vstack([np.zeros(6), np.cumsum(cols, axis=0)])


def _best_lines(sums: np.ndarray, u_min: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``sums`` (a run of points): the (latency ≥ 0, ns per bus byte u ≥ u_min) minimizing the
    relative squared error, and that error. Unconstrained optimum if feasible, else the best on a bound."""
    a, b, c, d, e, m = sums.T  # Σw², Σxw², Σx²w², Σw, Σxw, number of points

    def sse(lat, u):
        return np.maximum(a * lat * lat + 2 * b * lat * u + c * u * u - 2 * d * lat - 2 * e * u + m, 0.0)

    det = a * c - b * b
    safe = np.where(det > 0, det, 1.0)
    free_lat, free_u = (c * d - b * e) / safe, (a * e - b * d) / safe
    free_ok = (det > 1e-12 * np.maximum(a * c, 1e-300)) & (free_lat >= 0) & (free_u >= u_min)
    bound_lat = np.maximum((d - b * u_min) / np.where(a > 0, a, 1.0), 0.0)  # u at its bound
    zero_u = np.maximum(e / np.where(c > 0, c, 1.0), u_min)  # latency at 0
    lats = np.stack([np.where(free_ok, free_lat, 0.0), bound_lat, np.zeros_like(a)])
    us = np.stack([np.where(free_ok, free_u, u_min), np.full_like(a, u_min), zero_u])
    errs = np.stack([np.where(free_ok, sse(free_lat, free_u), np.inf), sse(bound_lat, u_min), sse(0.0, zero_u)])
    pick = np.argmin(errs, axis=0)
    cols = np.arange(a.size)
    return lats[pick, cols], us[pick, cols], np.where(m > 0, errs[pick, cols], 0.0)


def fit_protocol_lines(size_bytes, time_ns, n_ranks: int, *, gpu: str, datasheet_bytes_per_s: float,
                       min_size_bytes: int = 64 << 10, n_grid: int = 97) -> ProtocolLines:
    """Fit the :class:`ProtocolLines` of one GPU count to its measured all-reduce times (module docstring).

    ``size_bytes``, ``time_ns``: the measured medians at ``n_ranks`` GPUs, any order. The two switch sizes
    are searched over ``n_grid`` measured sizes a log step apart (every pair, vectorized); for each pair the
    three lines are closed-form relative least-squares fits to the robust curve, bus bandwidth at most
    ``datasheet_bytes_per_s``. A protocol may end up unused (its switch sizes equal).
    """
    s = np.asarray(size_bytes, np.float64)
    t = np.asarray(time_ns, np.float64)
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    target = robust_curve(t)
    keep = (s >= min_size_bytes) & (target > 0)
    s, target = s[keep], target[keep]
    if s.size < 6 or not n_ranks >= 2:
        raise CosimInputError("calibration", f"needs at least 6 sizes >= {min_size_bytes} B at {n_ranks} GPUs")
    if not datasheet_bytes_per_s > 0:
        raise CosimInputError("calibration", "the datasheet NVLink rate must be positive")
    x = 2 * (n_ranks - 1) / n_ranks * s
    grid = np.unique(np.concatenate([[0, s.size], np.searchsorted(s, np.geomspace(s[0], s[-1], n_grid))]))
    first, second = np.meshgrid(grid, grid, indexing="ij")
    first, second = first[first <= second], second[first <= second]
    bounds = [(np.zeros_like(first), first), (first, second), (second, np.full_like(first, s.size))]
    u_min = 1e9 / datasheet_bytes_per_s  # ns per bus byte at the datasheet rate: no line is faster
    sums = _line_sums(x, target)
    fits = [_best_lines(sums[hi] - sums[lo], u_min) for lo, hi in bounds]
    best = int(np.argmin(sum(err for _, _, err in fits)))

    def size_at(i: int) -> int:
        return int(s[i]) if i < s.size else int(s[-1]) + 1

    return ProtocolLines(gpu=gpu, n_ranks=int(n_ranks), ll128_from_bytes=size_at(first[best]),
                         simple_from_bytes=size_at(second[best]),
                         latency_ns=tuple(float(lat[best]) for lat, _, _ in fits),
                         efficiency=tuple(float(u_min / u[best]) for _, u, _ in fits),
                         datasheet_bytes_per_s=float(datasheet_bytes_per_s))


#: vidur a100_dgx / h100_dgx all_reduce.csv (commit 7d47513), bench/fit_nvlink_all_reduce.py --protocols GPU
PROTOCOL_LINES: dict[str, dict[int, ProtocolLines]] = {
    "a100": {
        2: ProtocolLines(gpu='a100', n_ranks=2, ll128_from_bytes=272_384, simple_from_bytes=903_168,
                           latency_ns=(49_114.0, 23_362.0, 43_846.0), efficiency=(1.0000, 0.0666, 0.5689),
                           datasheet_bytes_per_s=300e9),  # busbw LL 300 / LL128 20 / Simple 171 GB/s
        4: ProtocolLines(gpu='a100', n_ranks=4, ll128_from_bytes=329_728, simple_from_bytes=837_632,
                           latency_ns=(13_361.0, 19_711.0, 47_857.0), efficiency=(0.0253, 0.4573, 0.5746),
                           datasheet_bytes_per_s=300e9),  # busbw LL 8 / LL128 137 / Simple 172 GB/s
        8: ProtocolLines(gpu='a100', n_ranks=8, ll128_from_bytes=477_184, simple_from_bytes=24_641_536,
                           latency_ns=(33_291.0, 32_624.0, 142_995.0), efficiency=(0.0865, 0.4098, 0.7297),
                           datasheet_bytes_per_s=300e9),  # busbw LL 26 / LL128 123 / Simple 219 GB/s
    },
    "h100": {
        2: ProtocolLines(gpu='h100', n_ranks=2, ll128_from_bytes=681_984, simple_from_bytes=5_832_704,
                           latency_ns=(29_819.0, 34_605.0, 17_535.0), efficiency=(0.1067, 1.0000, 0.6477),
                           datasheet_bytes_per_s=450e9),  # busbw LL 48 / LL128 450 / Simple 291 GB/s
        4: ProtocolLines(gpu='h100', n_ranks=4, ll128_from_bytes=1_042_432, simple_from_bytes=5_046_272,
                           latency_ns=(40_373.0, 23_438.0, 23_570.0), efficiency=(1.0000, 0.5627, 0.7738),
                           datasheet_bytes_per_s=450e9),  # busbw LL 450 / LL128 253 / Simple 348 GB/s
        8: ProtocolLines(gpu='h100', n_ranks=8, ll128_from_bytes=477_184, simple_from_bytes=8_355_840,
                           latency_ns=(26_143.0, 27_558.0, 40_934.0), efficiency=(0.1591, 0.6839, 0.8372),
                           datasheet_bytes_per_s=450e9),  # busbw LL 72 / LL128 308 / Simple 377 GB/s
    },
}
