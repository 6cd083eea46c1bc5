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
an unknown GPU uses H100's too, and so do B200 and GB200 NVL72: no NVLink 5 measurement is shipped, so their
model is derived from the datasheet — H100's launch and step costs and H100's fractions of the datasheet
rate, applied to NVLink 5's 900 GB/s per direction. This one line is what the tuner uses for the NVLink
part of collectives that span servers.

In-server all-reduce: a measured curve
--------------------------------------
An all-reduce ring inside one server follows NCCL's measured times themselves, as a compact curve per GPU
type and GPU count (:class:`AllReduceCurve`): knots (size, time) taken from the robust measured curve
(:func:`robust_curve`: at each size the median of the medians of its 19 neighbouring sizes) at sizes
≥ 64 KiB, chosen by greedy insertion of the worst point until piecewise-linear interpolation in
log(size)–log(time) is within 2 % of the robust curve everywhere (:func:`fit_all_reduce_curve`). Between
knots the time is that interpolation; below the first knot it is the first knot's time (the measured
medians below 64 KiB sit on the 20–60 µs launch floor); above the last knot it grows at the *Simple line's*
bus bandwidth ``simple_bus_bytes_per_s``: the relative least-squares line ``latency + 2(n−1)/n · S / busbw``
through the robust curve's largest quarter of sizes (16–64 MiB), NCCL's large-message busbw, at least the
busbw any knot reaches and at most the datasheet NVLink rate.

A curve's time splits into a size-proportional part — the bus bytes 2(n−1)/n · S at the Simple line's
busbw — and the rest (:meth:`AllReduceCurve.latency_ns`: launch, synchronisation, NCCL's protocol and
channel choices at that size). A hardware spec with another NVLink rate than the fit's datasheet rate
scales the Simple busbw by the ratio of the two rates and keeps the rest, so only the size-proportional part
changes. Which protocol NCCL runs (LL below ``ll128_from_bytes``, LL128 below ``simple_from_bytes``,
Simple above) names the call's protocol; the time comes from the curve. The switch sizes are those of a
three-lines-per-protocol least-squares fit to the same CSVs (switch sizes searched on a 97-size log grid).

The knots ship in ``nvlink_all_reduce_curves.json`` beside this module (same source and license as above;
n = 2, 4, 8 measured, another n uses the nearest measured count, the larger on a tie), regenerated with
``python bench/fit_nvlink_all_reduce.py PATH/<gpu>_dgx/all_reduce.csv --curve <gpu> --datasheet-gbps R
-o cosim/collectives/nvlink_all_reduce_curves.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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

    The executor copies at the fastest bus bandwidth this GPU's calibration holds (``copy_bytes_per_s``:
    its Simple lines' and one-line busbw, :func:`max_efficiency`); what a call's busbw loses against it is
    extra copy time of its NVLink copies (:meth:`cosim.collectives.tuning.TuningModel.nvlink_extra_ns_per_byte`)."""

    gpu: str
    nvlink_bytes_per_s: float  #: datasheet NVLink rate per GPU per direction, bytes/s
    bus_bytes_per_s: float  #: rate NCCL sustains at large sizes (the one-line fit), bytes/s
    copy_bytes_per_s: float  #: the DAG executor's NVLink copy rate: the fastest calibrated busbw, bytes/s
    copy_latency_ns: float  #: fixed latency of one NVLink copy in the executor, ns
    launch_ns: float
    step_ns: float
    nvls: bool = False  #: the NVLink switches reduce in the network (NCCL's NVLS all-reduce can run)

    def __post_init__(self) -> None:
        if not isinstance(self.nvls, (bool, np.bool_)):
            raise CosimInputError("nvlink.nvls", f"must be true or false, got {self.nvls!r}")
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


#: SMs NCCL's kernels hold by default (HardwareSpec.nccl_sms), for hardware specs that do not say
DEFAULT_NCCL_SMS = 16
#: SMs DeepEP's high-throughput kernels hold by default (HardwareSpec.deepep_sms), for specs that do not say
DEFAULT_DEEPEP_SMS = 20
#: SMs of the default GPU (an H100), for hardware specs that do not say
DEFAULT_SM_COUNT = 132
#: most of its compute rate a GPU may lose to communication (DagExecutor::CommComputeSlowdown's maximum)
MAX_COMM_COMPUTE_SLOWDOWN = 0.95


def executor_attributes(hardware: dict | None) -> dict[str, str]:
    """The DagExecutor's ns-3 attributes for a trace's ``hardware`` spec: its NVLink copies
    (:meth:`NvlinkModel.executor_attributes`) and the share of compute lost while it communicates
    (``nccl_sms / sm_count``: NCCL's thread blocks take that many SMs from the GPU's kernels; likewise
    ``deepep_sms / sm_count`` while DeepEP's high-throughput kernels move data)."""
    hw = hardware or {}
    sms = hw.get("sm_count", DEFAULT_SM_COUNT)
    held = {"nccl_sms": hw.get("nccl_sms", DEFAULT_NCCL_SMS), "deepep_sms": hw.get("deepep_sms", DEFAULT_DEEPEP_SMS)}
    for field, value in (("sm_count", sms), *held.items()):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise CosimInputError(f"trace hardware.{field}", f"must be an integer >= 0, got {value!r}")
    for field, value in held.items():
        if not 0 <= value <= MAX_COMM_COMPUTE_SLOWDOWN * sms:
            raise CosimInputError(f"trace hardware.{field}", f"must be at most {MAX_COMM_COMPUTE_SLOWDOWN:g} × "
                                  f"sm_count ({sms}), got {value}")
    return {**nvlink_model(hw).executor_attributes(),
            "DagExecutor::CommComputeSlowdown": repr(held["nccl_sms"] / sms),
            "DagExecutor::ExpertCommComputeSlowdown": repr(held["deepep_sms"] / sms)}


def nvlink_model(hardware: dict | None) -> NvlinkModel:
    """The NVLink model of a trace's ``hardware`` spec (its ``name``, ``nvlink_bytes_per_s`` and, if given,
    ``nvlink_latency_ns`` and ``nvls``); defaults for whatever is missing (an H100 without NVLS)."""
    hw = hardware or {}
    cal = calibration_for(hw.get("name"))
    rate = hw.get("nvlink_bytes_per_s", DEFAULT_NVLINK_BYTES_PER_S)
    latency = hw.get("nvlink_latency_ns", DEFAULT_NVLINK_LATENCY_NS)
    for field, value in (("nvlink_bytes_per_s", rate), ("nvlink_latency_ns", latency)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not np.isfinite(value):
            raise CosimInputError(f"trace hardware.{field}", f"must be a number >= 0, got {value!r}")
    if not rate > 0:
        raise CosimInputError("trace hardware.nvlink_bytes_per_s", "must be positive")
    nvls = hw.get("nvls", False)
    if not isinstance(nvls, bool):
        raise CosimInputError("trace hardware.nvls", f"must be true or false, got {nvls!r}")
    return NvlinkModel(gpu=cal.gpu, nvlink_bytes_per_s=float(rate), bus_bytes_per_s=float(rate) * cal.efficiency,
                       copy_bytes_per_s=float(rate) * max_efficiency(cal.gpu), copy_latency_ns=float(latency),
                       launch_ns=cal.launch_ns, step_ns=cal.step_ns, nvls=nvls)


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


# --- in-server all-reduce: a measured curve (module docstring) --------------------------------------------

#: NCCL's protocols in the order it uses them as the size grows
PROTOCOL_NAMES = ("LL", "LL128", "Simple")
#: sizes in the window of the robust measured curve: the point and 9 neighbours on each side
ROBUST_WINDOW = 19
#: the knots file shipped beside this module
CURVES_FILE = Path(__file__).resolve().parent / "nvlink_all_reduce_curves.json"


def bus_bytes(size_bytes, n_ranks):
    """Bytes each GPU moves over NVLink in a ring all-reduce of ``size_bytes``: 2(n−1)/n · S."""
    return 2 * (n_ranks - 1) / n_ranks * np.asarray(size_bytes, np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllReduceCurve:
    """Measured in-server all-reduce time of one GPU type on ``n_ranks`` GPUs (module docstring)."""

    gpu: str
    n_ranks: int
    knot_bytes: tuple[int, ...]  #: knot sizes, increasing, bytes
    knot_ns: tuple[float, ...]  #: robust measured time at each knot, ns
    simple_bus_bytes_per_s: float  #: the Simple line's bus bandwidth at the datasheet rate, bytes/s
    ll128_from_bytes: int  #: smallest size NCCL runs with LL128, bytes
    simple_from_bytes: int  #: smallest size NCCL runs with Simple, bytes
    datasheet_bytes_per_s: float  #: NVLink rate per GPU per direction the fit was made against, bytes/s

    def __post_init__(self) -> None:
        s, t = np.asarray(self.knot_bytes, np.float64), np.asarray(self.knot_ns, np.float64)
        where = f"all-reduce curve {self.gpu} x {self.n_ranks}"
        if self.n_ranks < 2 or s.size < 2 or s.size != t.size:
            raise CosimInputError(where, "needs n_ranks >= 2 and as many knot times as knot sizes (>= 2)")
        if not (np.all(np.diff(s) > 0) and s[0] > 0 and np.all(np.isfinite(t)) and np.all(t > 0)):
            raise CosimInputError(where, "knot sizes must increase from > 0 and knot times be positive")
        if not 0 < self.simple_bus_bytes_per_s <= self.datasheet_bytes_per_s:
            raise CosimInputError(where, "the Simple busbw must be positive and at most the datasheet NVLink rate")
        if np.any(bus_bytes(s, self.n_ranks) / t * 1e9 > self.simple_bus_bytes_per_s * (1 + 1e-9)):
            raise CosimInputError(where, "a knot is faster than the Simple busbw (its latency would be negative)")

    def protocol(self, size_bytes):
        """Index into :data:`PROTOCOL_NAMES` of the protocol NCCL uses at ``size_bytes`` (numpy-broadcast)."""
        s = np.asarray(size_bytes)
        return (s >= self.ll128_from_bytes).astype(np.int64) + (s >= self.simple_from_bytes)

    def bus_bytes_per_s(self, nvlink_bytes_per_s: float | None = None) -> float:
        """The Simple line's bus bandwidth on an NVLink of that rate (the datasheet's if None), bytes/s."""
        return self.simple_bus_bytes_per_s * (nvlink_bytes_per_s or self.datasheet_bytes_per_s) \
            / self.datasheet_bytes_per_s

    def latency_ns(self, size_bytes):
        """The curve's time less its size-proportional part at the datasheet rate, ns (numpy-broadcast)."""
        s = np.asarray(size_bytes, np.float64)
        knots_s, knots_t = np.asarray(self.knot_bytes, np.float64), np.asarray(self.knot_ns, np.float64)
        inside = np.exp(np.interp(np.log(np.clip(s, knots_s[0], knots_s[-1])), np.log(knots_s), np.log(knots_t)))
        proportional = bus_bytes(s, self.n_ranks) / self.simple_bus_bytes_per_s * 1e9
        last_latency = knots_t[-1] - bus_bytes(knots_s[-1], self.n_ranks) / self.simple_bus_bytes_per_s * 1e9
        return np.where(s > knots_s[-1], last_latency, inside - proportional)

    def time_ns(self, size_bytes, nvlink_bytes_per_s: float | None = None):
        """Time of an all-reduce of ``size_bytes`` on an NVLink of that rate, ns (numpy-broadcast)."""
        s = np.asarray(size_bytes, np.float64)
        return self.latency_ns(s) + bus_bytes(s, self.n_ranks) / self.bus_bytes_per_s(nvlink_bytes_per_s) * 1e9


def load_curves(path: Path) -> dict[str, dict[int, AllReduceCurve]]:
    """The curves of a knots file (the format :func:`curves_document` writes), by GPU and GPU count."""
    doc = json.loads(path.read_text())
    out = {}
    for gpu, entry in doc["curves"].items():
        out[gpu] = {int(n): AllReduceCurve(gpu=gpu, n_ranks=int(n), knot_bytes=tuple(c["knot_bytes"]),
                                           knot_ns=tuple(float(v) for v in c["knot_ns"]),
                                           simple_bus_bytes_per_s=float(c["simple_bus_bytes_per_s"]),
                                           ll128_from_bytes=int(c["ll128_from_bytes"]),
                                           simple_from_bytes=int(c["simple_from_bytes"]),
                                           datasheet_bytes_per_s=float(entry["datasheet_bytes_per_s"]))
                    for n, c in entry["by_gpu_count"].items()}
    return out


#: vidur a100_dgx / h100_dgx all_reduce.csv (commit 7d47513), bench/fit_nvlink_all_reduce.py --curve GPU
ALL_REDUCE_CURVES: dict[str, dict[int, AllReduceCurve]] = load_curves(CURVES_FILE)


def all_reduce_curve_for(gpu: str | None, n_ranks: int) -> AllReduceCurve:
    """The curve of GPU type ``gpu`` (as :func:`calibration_for`) for the measured GPU count nearest
    ``n_ranks`` (the larger on a tie)."""
    name = (gpu or DEFAULT_GPU).lower()
    name = _SAME_AS.get(name, name)
    table = ALL_REDUCE_CURVES.get(name, ALL_REDUCE_CURVES[DEFAULT_GPU])
    counts = np.array(sorted(table))
    return table[int(counts[np.lexsort((-counts, np.abs(counts - n_ranks)))[0]])]


def max_efficiency(gpu: str | None) -> float:
    """The largest bus bandwidth / datasheet rate of ``gpu``'s one-line fit and its curves' Simple lines:
    what the DAG executor copies at, so that no NVLink copy needs a negative extra time."""
    name = (gpu or DEFAULT_GPU).lower()
    name = _SAME_AS.get(name, name)
    table = ALL_REDUCE_CURVES.get(name, ALL_REDUCE_CURVES[DEFAULT_GPU])
    return max([calibration_for(gpu).efficiency]
               + [c.simple_bus_bytes_per_s / c.datasheet_bytes_per_s for c in table.values()])


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


def greedy_knots(size_bytes: np.ndarray, target_ns: np.ndarray, tolerance: float) -> np.ndarray:
    """Indices of the knots, first and last point included, that log–log interpolation needs to stay within
    ``tolerance`` (relative) of ``target_ns`` at every point: the worst point is added until it does."""
    ls, lt = np.log(size_bytes), np.log(target_ns)
    chosen = np.zeros(ls.size, bool)
    chosen[[0, -1]] = True
    while True:
        k = np.flatnonzero(chosen)
        err = np.abs(np.exp(np.interp(ls, ls[k], lt[k]) - lt) - 1)
        worst = int(np.argmax(err))
        if err[worst] <= tolerance or chosen[worst]:
            return k
        chosen[worst] = True


def simple_line_bus_bytes_per_s(bus: np.ndarray, target_ns: np.ndarray, datasheet_bytes_per_s: float) -> float:
    """Bus bandwidth of the relative least-squares line ``latency + bus / busbw`` through the points, at
    least the busbw of any point and at most ``datasheet_bytes_per_s`` (module docstring), bytes/s."""
    a = np.stack([np.ones_like(bus), bus], axis=1) / target_ns[:, None]
    (_, ns_per_byte), *_ = np.linalg.lstsq(a, np.ones_like(bus), rcond=None)
    fitted = 1e9 / ns_per_byte if ns_per_byte > 0 else datasheet_bytes_per_s
    return float(min(max(fitted, float(np.max(bus / target_ns)) * 1e9), datasheet_bytes_per_s))


def fit_all_reduce_curve(size_bytes, time_ns, n_ranks: int, *, gpu: str, datasheet_bytes_per_s: float,
                         ll128_from_bytes: int, simple_from_bytes: int, tolerance: float = 0.02,
                         min_size_bytes: int = 64 << 10) -> AllReduceCurve:
    """The :class:`AllReduceCurve` of measured medians ``time_ns`` at ``size_bytes`` (any order) on
    ``n_ranks`` GPUs of one server: knots from the robust curve at sizes ≥ ``min_size_bytes`` within
    ``tolerance``, the Simple line through its largest quarter of sizes (module docstring)."""
    s = np.asarray(size_bytes, np.float64)
    t = np.asarray(time_ns, np.float64)
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    target = robust_curve(t)
    keep = (s >= min_size_bytes) & (target > 0)
    s, inverse = np.unique(s[keep], return_inverse=True)  # a size measured twice: the mean of its two
    target = np.bincount(inverse, weights=target[keep]) / np.bincount(inverse)
    if s.size < 4 or not n_ranks >= 2:
        raise CosimInputError("calibration", f"needs at least 4 sizes >= {min_size_bytes} B at {n_ranks} GPUs "
                              "(n >= 2)")
    if not datasheet_bytes_per_s > 0 or not tolerance > 0:
        raise CosimInputError("calibration", "the datasheet NVLink rate and the tolerance must be positive")
    bus = bus_bytes(s, n_ranks)
    if np.max(bus / target) * 1e9 > datasheet_bytes_per_s:
        raise CosimInputError("calibration", f"{gpu} x {n_ranks}: a measured busbw exceeds the datasheet rate",
                              "check the units (bytes, ms) and --datasheet-gbps")
    top = s >= s[-1] / 4
    simple = simple_line_bus_bytes_per_s(bus[top], target[top], datasheet_bytes_per_s)
    k = greedy_knots(s, target, tolerance)
    return AllReduceCurve(gpu=gpu, n_ranks=int(n_ranks), knot_bytes=tuple(int(v) for v in s[k]),
                          knot_ns=tuple(float(v) for v in target[k]), simple_bus_bytes_per_s=simple,
                          ll128_from_bytes=int(ll128_from_bytes), simple_from_bytes=int(simple_from_bytes),
                          datasheet_bytes_per_s=float(datasheet_bytes_per_s))


def curves_document(curves: dict[str, dict[int, AllReduceCurve]], *, source: str, command: str) -> dict:
    """The knots file's content (JSON-ready) for ``curves`` by GPU and GPU count."""
    return {"source": source, "command": command, "curves": {
        gpu: {"datasheet_bytes_per_s": next(iter(table.values())).datasheet_bytes_per_s,
              "by_gpu_count": {str(n): {"ll128_from_bytes": c.ll128_from_bytes,
                                        "simple_from_bytes": c.simple_from_bytes,
                                        "simple_bus_bytes_per_s": round(c.simple_bus_bytes_per_s),
                                        "knot_bytes": list(c.knot_bytes),
                                        "knot_ns": [round(v, 1) for v in c.knot_ns]}
                               for n, c in sorted(table.items())}}
        for gpu, table in sorted(curves.items())}}
