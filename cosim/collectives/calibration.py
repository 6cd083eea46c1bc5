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
an unknown GPU uses H100's too.
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
    """The NVLink side of one run: what the DAG executor copies at and what NCCL adds per call and step."""

    gpu: str
    nvlink_bytes_per_s: float  #: datasheet NVLink rate per GPU per direction, bytes/s
    bus_bytes_per_s: float  #: rate NCCL sustains, the DAG executor's NVLink copy rate, bytes/s
    copy_latency_ns: float  #: fixed latency of one NVLink copy in the executor, ns
    launch_ns: float
    step_ns: float

    def __post_init__(self) -> None:
        for name in ("nvlink_bytes_per_s", "bus_bytes_per_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not np.isfinite(v):
                raise CosimInputError(f"nvlink.{name}", f"must be a positive number, got {v!r}")
        for name in ("copy_latency_ns", "launch_ns", "step_ns"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or not np.isfinite(v):
                raise CosimInputError(f"nvlink.{name}", f"must be a number >= 0, got {v!r}")

    def executor_attributes(self) -> dict[str, str]:
        """The ns-3 attributes of the DagExecutor for this model (its NVLink copy rate and latency)."""
        return {"DagExecutor::NvlinkDataRate": f"{round(self.bus_bytes_per_s * 8)}bps",
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
                       copy_latency_ns=float(latency), launch_ns=cal.launch_ns, step_ns=cal.step_ns)


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
