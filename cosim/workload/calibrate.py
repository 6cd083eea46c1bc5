"""Fit the compute model's coefficients to measured kernel profiles (``cosim calibrate``).

Profiles are CSV files in the format of Vidur's ``mlp.csv`` (microsoft/vidur, ``data/`` folder): one row per
(num_tokens, num_tensor_parallel_workers) point of one model, forward kernel times in **milliseconds** in
``time_stats.<op>.median``, and the model shape in ``n_head``, ``n_kv_head``, ``n_embd`` (hidden),
``n_expanded_embd`` (FFN), ``vocab_size``, ``use_gated_mlp``. Shapes are per TP shard. Each profiled op
maps to one kernel of :mod:`cosim.workload.compute` (n tokens, t TP ranks)::

    attn_pre_proj  GEMM (n, (h + 2·kv)/t, h)     attn_post_proj  GEMM (n, h, h/t)
    mlp_up_proj    GEMM (n, g·f/t, h)            mlp_down_proj   GEMM (n, h, f/t)
    input_layernorm, post_attention_layernorm    norm        4·n·h bytes
    attn_rope      rope        4·n·(h + kv)/t    mlp_act         activation  6·n·f/t (gated) or 4·n·f/t
    add            elementwise 6·n·h             emb             embedding   4·n·h

The fit minimises the squared log ratio predicted/measured over every row, by Levenberg–Marquardt
(:mod:`cosim.workload.lsq`): one joint fit of the eight GEMM coefficients over the four GEMM ops, and per
memory-bound kind a fit of (efficiency, launch) over every row, after which the efficiency alone is refitted
(launch kept) on the rows of at least STREAM_TOKENS tokens. Below that, the operands partly stay in L2 and
the kernels run faster per byte than from HBM; training micro-batches (b·s ≥ 2048 tokens) are all above it,
where a fit over every row made norms 13-19 % too fast at the largest profiled sizes. Kinds without data
keep the base GPU's values. The flash-attention curves are not fitted here (no attention kernel in these
profiles) but to published FlashAttention figures (:mod:`cosim.workload.shipped_coefficients`). Deterministic.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.errors import CosimInputError
from cosim.workload import kernels as kn
from cosim.workload.coefficients import COEFFICIENT_FIELDS
from cosim.workload.compute import (
    gemm_coefficients,
    gemm_time_ns,
    stream_coefficients,
    stream_time_ns,
)
from cosim.workload.hardware import HardwareSpec
from cosim.workload.lsq import least_squares

SHAPE_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
                 "num_tensor_parallel_workers")
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
#: profiled memory-bound op -> compute-model kind
STREAM_OPS = {"emb": "embedding", "input_layernorm": "norm", "post_attention_layernorm": "norm",
              "attn_rope": "rope", "mlp_act": "activation", "add": "elementwise"}
PROFILE_OPS = GEMM_OPS + tuple(STREAM_OPS)
#: tokens from which a point counts as training-sized in the error table
LARGE_TOKENS = 1024
#: memory-bound kernels take their HBM efficiency from rows of at least this many tokens (module docstring)
STREAM_TOKENS = 2048
#: GEMM coefficients the fit sets, with their lsq transform and start value
GEMM_FIT = (("compute_efficiency", "logit", 0.75), ("gemm_memory_efficiency", "logit", 0.8),
            ("gemm_small_m", "log", 100.0), ("gemm_small_n", "log", 100.0), ("gemm_small_k", "log", 40.0),
            ("gemm_wave_weight", "logit", 0.2), ("gemm_roofline_sharpness", "log1p", 4.0),
            ("gemm_launch_ns", "log", 5000.0))


#: kernel times a profile row may hold, ns: 1 ns to 1000 s (a time outside is a unit or a corrupted cell)
KERNEL_NS_RANGE = (1.0, 1e12)


class FitFailed(CosimInputError):
    """A least-squares fit that ended where it started: the rows of that kind do not determine it."""


def _moved(theta, start, what: str):
    """``theta`` if the fit of ``what`` moved from ``start``; else a FitFailed naming it (a fit that fails
    must not be written with its starting values as if fitted)."""
    if np.all(np.asarray(theta, np.float64) == np.asarray(start, np.float64)) or not np.all(np.isfinite(theta)):
        raise FitFailed(what, "the fit did not move from its starting values (no step lowered the error)",
                        "check the profile rows of that operator, or leave its columns out")
    return theta


def time_column(op: str) -> str:
    """The CSV column holding the median time (ms) of ``op``."""
    return f"time_stats.{op}.median"


@dataclass(frozen=True, slots=True)
class Profiles:
    """Rows of one or more profile files: shape columns and per-op median times (ns, NaN if absent)."""

    shape: dict[str, np.ndarray]  #: SHAPE_COLUMNS -> float64 arrays (use_gated_mlp as 0/1)
    times_ns: dict[str, np.ndarray]  #: op -> measured median time per row, ns (ops present in every file)
    files: tuple[str, ...]
    digests: tuple[str, ...]  #: sha256 of each file

    @property
    def n_rows(self) -> int:
        """Number of profile rows."""
        return int(self.shape["num_tokens"].size)


def find_profiles(source: str | Path) -> list[Path]:
    """The CSV files of ``source``: the file itself, or every ``*.csv`` below a directory (sorted)."""
    path = Path(source)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CosimInputError("PROFILE_DIR", f"{str(source)!r} is neither a file nor a directory")
    files = sorted(p for p in path.rglob("*.csv") if p.is_file())
    if not files:
        raise CosimInputError("PROFILE_DIR", f"no .csv file under {str(source)!r}",
                              "give a directory of profiles in Vidur's mlp.csv format")
    return files


def _number(text: str, where: str, column: str) -> float:
    low = text.strip().lower()
    if column == "use_gated_mlp" and low in ("true", "false", "1", "0"):
        return 1.0 if low in ("true", "1") else 0.0
    try:
        value = float(text)
    except ValueError:
        raise CosimInputError(f"{where}: column {column}", f"cannot read {text!r} as a number") from None
    if not np.isfinite(value):
        raise CosimInputError(f"{where}: column {column}", f"must be finite, got {text!r}")
    return value


def _read_one(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CosimInputError(str(path), f"cannot read as CSV ({exc})") from None
    for col in SHAPE_COLUMNS:
        if col not in header:
            raise CosimInputError(f"{path}: column {col}", "is missing", "profiles need the Vidur mlp.csv columns")
    ops = [op for op in PROFILE_OPS if time_column(op) in header]
    if not ops:
        raise CosimInputError(f"{path}: column {time_column(GEMM_OPS[0])}", "is missing",
                              f"give at least one of the time_stats.<op>.median columns of {', '.join(PROFILE_OPS)}")
    if not rows:
        raise CosimInputError(str(path), "has no data rows")
    shape = {c: np.empty(len(rows)) for c in SHAPE_COLUMNS}
    times = {op: np.empty(len(rows)) for op in ops}
    for i, row in enumerate(rows):
        where = f"{path}:{i + 2}"
        for c in SHAPE_COLUMNS:
            shape[c][i] = _number(row[c] or "", where, c)
        for op in ops:
            col = time_column(op)
            times[op][i] = _number(row[col] or "", where, col) * 1e6  # ms -> ns
            if not KERNEL_NS_RANGE[0] <= times[op][i] <= KERNEL_NS_RANGE[1]:
                raise CosimInputError(f"{where}: column {col}", f"a kernel time of {row[col]!r} ms is outside "
                                      f"{KERNEL_NS_RANGE[0] / 1e6:g}..{KERNEL_NS_RANGE[1] / 1e6:g} ms",
                                      "fix or remove the row")
    for c in SHAPE_COLUMNS[:5] + SHAPE_COLUMNS[6:]:
        bad = np.flatnonzero(~(shape[c] >= 1))
        if bad.size:
            raise CosimInputError(f"{path}:{bad[0] + 2}: column {c}", f"must be ≥ 1, got {shape[c][bad[0]]:g}")
    return shape, times


def read_profiles(paths: Sequence[str | Path]) -> Profiles:
    """Read and check profile CSVs; CosimInputError naming the file, line and column if malformed."""
    shapes, times, digests = [], [], []
    for p in map(Path, paths):
        s, t = _read_one(p)
        shapes.append(s)
        times.append(t)
        digests.append(hashlib.sha256(p.read_bytes()).hexdigest())
    ops = [op for op in PROFILE_OPS if all(op in t for t in times)]
    if not ops:
        raise CosimInputError("profiles", "no operator column is present in every file")
    return Profiles(shape={c: np.concatenate([s[c] for s in shapes]) for c in SHAPE_COLUMNS},
                    times_ns={op: np.concatenate([t[op] for t in times]) for op in ops},
                    files=tuple(str(p) for p in paths), digests=tuple(digests))


def gemm_shapes(p: Profiles) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(M, N, K) per row of each profiled GEMM op (module docstring)."""
    s = p.shape
    n, t, h, f = s["num_tokens"], s["num_tensor_parallel_workers"], s["n_embd"], s["n_expanded_embd"]
    kv = s["n_kv_head"] * h / s["n_head"]
    gate = np.where(s["use_gated_mlp"] > 0, 2.0, 1.0)
    return {"attn_pre_proj": (n, (h + 2 * kv) / t, h), "attn_post_proj": (n, h, h / t),
            "mlp_up_proj": (n, gate * f / t, h), "mlp_down_proj": (n, h, f / t)}


def stream_bytes(p: Profiles) -> dict[str, np.ndarray]:
    """Bytes moved per row of each profiled memory-bound op (module docstring)."""
    s = p.shape
    n, t, h, f = s["num_tokens"], s["num_tensor_parallel_workers"], s["n_embd"], s["n_expanded_embd"]
    kv = s["n_kv_head"] * h / s["n_head"]
    act = np.where(s["use_gated_mlp"] > 0, kn._act_bytes(True, False), kn._act_bytes(False, False))
    return {"emb": kn.EMBED_FWD * n * h, "input_layernorm": kn.NORM_FWD * n * h,
            "post_attention_layernorm": kn.NORM_FWD * n * h, "attn_rope": kn.ROPE_FWD * n * (h + kv) / t,
            "mlp_act": act * n * f / t, "add": kn.ADD_FWD * n * h}


def predict_ns(p: Profiles, hw: HardwareSpec) -> dict[str, np.ndarray]:
    """Predicted time (ns) per row of every op present in ``p``, on ``hw``."""
    out = {}
    shapes, nbytes = gemm_shapes(p), stream_bytes(p)
    for op in p.times_ns:
        if op in GEMM_OPS:
            out[op] = gemm_time_ns(*shapes[op], **gemm_coefficients(hw))
        else:
            eff, launch = stream_coefficients(hw, STREAM_OPS[op])
            out[op] = stream_time_ns(nbytes[op], hbm_bytes_per_s=hw.hbm_bytes_per_s, efficiency=eff,
                                     launch_ns=launch)
    return out


@dataclass(frozen=True, slots=True)
class OpError:
    """In-sample |predicted / measured − 1| of one profiled op."""

    points: int
    median: float
    max: float
    median_large: float  #: over rows with num_tokens ≥ LARGE_TOKENS (NaN if none)
    max_large: float

    def as_dict(self) -> dict[str, float | int]:
        """TOML-ready mapping (NaN left out)."""
        d = {"points": self.points, "median": self.median, "max": self.max, "median_large": self.median_large,
             "max_large": self.max_large}
        return {k: v for k, v in d.items() if not (isinstance(v, float) and np.isnan(v))}


def errors(p: Profiles, hw: HardwareSpec) -> dict[str, OpError]:
    """The error table of ``hw``'s predictions against every op of ``p``."""
    pred = predict_ns(p, hw)
    large = p.shape["num_tokens"] >= LARGE_TOKENS
    out = {}
    for op, measured in p.times_ns.items():
        rel = np.abs(pred[op] / measured - 1.0)
        big = rel[large]
        out[op] = OpError(points=int(rel.size), median=round(float(np.median(rel)), 4),
                          max=round(float(rel.max()), 4),
                          median_large=round(float(np.median(big)), 4) if big.size else float("nan"),
                          max_large=round(float(big.max()), 4) if big.size else float("nan"))
    return out


@dataclass(frozen=True, slots=True)
class Fit:
    """Fitted coefficients (HardwareSpec field -> value), the fitted spec and its in-sample errors."""

    coefficients: dict[str, float | int]
    hardware: HardwareSpec
    errors: dict[str, OpError]
    fitted_kinds: tuple[str, ...]  #: memory-bound kinds with data (the others kept the base values)


def _fit_gemms(p: Profiles, base: HardwareSpec) -> dict[str, float]:
    ops = [op for op in GEMM_OPS if op in p.times_ns]
    shapes = gemm_shapes(p)
    m, n, k = (np.concatenate([shapes[op][i] for op in ops]) for i in range(3))
    log_measured = np.log(np.concatenate([p.times_ns[op] for op in ops]))
    fixed = gemm_coefficients(base)
    names = [name for name, _, _ in GEMM_FIT]
    keyword = {"gemm_memory_efficiency": "memory_efficiency", "gemm_small_m": "small_m", "gemm_small_n": "small_n",
               "gemm_small_k": "small_k", "gemm_wave_weight": "wave_weight", "gemm_roofline_sharpness": "sharpness",
               "gemm_launch_ns": "launch_ns", "compute_efficiency": "compute_efficiency"}

    def residuals(theta: np.ndarray) -> np.ndarray:
        kw = dict(fixed)
        kw.update({keyword[name]: float(x) for name, x in zip(names, theta)})
        return np.log(gemm_time_ns(m, n, k, **kw)) - log_measured

    # a few starts of the two shape parameters that make the cost surface bumpy; keep the best fit
    best, best_cost = None, np.inf
    for sharpness, wave in ((4.0, 0.2), (2.0, 0.5), (10.0, 0.1)):
        start = [{"gemm_roofline_sharpness": sharpness, "gemm_wave_weight": wave}.get(n, s) for n, _, s in GEMM_FIT]
        theta = _moved(least_squares(residuals, start, [t for _, t, _ in GEMM_FIT]), start, "GEMM coefficients")
        r = residuals(theta)
        if float(r @ r) < best_cost:
            best, best_cost = theta, float(r @ r)
    return {name: float(x) for name, x in zip(names, best)}


def _fit_stream(nbytes: np.ndarray, measured: np.ndarray, tokens: np.ndarray, hbm: float,
                what: str) -> tuple[float, float]:
    log_measured = np.log(measured)

    def residuals(theta: np.ndarray) -> np.ndarray:
        return np.log(stream_time_ns(nbytes, hbm_bytes_per_s=hbm, efficiency=float(theta[0]),
                                     launch_ns=float(theta[1]))) - log_measured

    eff, launch = _moved(least_squares(residuals, [0.5, 3000.0], ["logit", "log"]), [0.5, 3000.0], what)
    big = tokens >= STREAM_TOKENS
    if np.any(big):
        def big_residuals(theta: np.ndarray) -> np.ndarray:
            return np.log(stream_time_ns(nbytes[big], hbm_bytes_per_s=hbm, efficiency=float(theta[0]),
                                         launch_ns=float(launch))) - log_measured[big]

        (eff,) = _moved(least_squares(big_residuals, [0.5], ["logit"]), [0.5], what)
    return float(eff), float(launch)


def _sig(x: float) -> float:
    """``x`` to 6 significant digits: coefficients stay readable and round-trip through TOML."""
    return float(f"{x:.6g}")


def fit_profiles(p: Profiles, base: HardwareSpec) -> Fit:
    """Fit the compute-model coefficients of ``base``'s GPU to the profiles ``p`` (module docstring)."""
    coeffs: dict[str, float | int] = {}
    if any(op in p.times_ns for op in GEMM_OPS):
        coeffs.update({k: _sig(v) for k, v in _fit_gemms(p, base).items()})
    nbytes = stream_bytes(p)
    kinds = []
    for kind in dict.fromkeys(STREAM_OPS.values()):
        ops = [op for op, kd in STREAM_OPS.items() if kd == kind and op in p.times_ns]
        if not ops:
            continue
        kinds.append(kind)
        eff, launch = _fit_stream(np.concatenate([nbytes[op] for op in ops]),
                                  np.concatenate([p.times_ns[op] for op in ops]),
                                  np.concatenate([p.shape["num_tokens"]] * len(ops)), base.hbm_bytes_per_s,
                                  f"{kind} kernels ({', '.join(ops)})")
        prefix = "memory" if kind == "elementwise" else kind  # field names of cosim.workload.hardware
        coeffs["memory_efficiency" if kind == "elementwise" else f"{kind}_memory_efficiency"] = _sig(eff)
        coeffs[f"{prefix}_launch_ns"] = _sig(launch)
    try:
        hw = base.with_overrides(**coeffs)
    except CosimInputError as exc:  # a fit that ran off to a value no GPU has: the rows do not determine it
        name = exc.field.rsplit(".", 1)[-1]
        raise FitFailed(f"fitted {name}", f"the fit ended outside its range ({exc.problem}): the profile's "
                        "kernel times do not fit the model",
                        "check the profile rows of that operator (time_stats.<op>.median, ms), or leave its "
                        "columns out") from None
    return Fit(coefficients=coeffs, hardware=hw, errors=errors(p, hw), fitted_kinds=tuple(kinds))


def format_errors(errs: dict[str, OpError]) -> str:
    """The in-sample error table as text (one row per op)."""
    rows = [f"{'operator':<26}{'points':>7}{'median':>9}{'max':>9}{'median n≥' + str(LARGE_TOKENS):>14}"
            f"{'max n≥' + str(LARGE_TOKENS):>11}"]
    for op, e in errs.items():
        rows.append(f"{op:<26}{e.points:>7}{100 * e.median:>8.1f}%{100 * e.max:>8.1f}%"
                    f"{100 * e.median_large:>13.1f}%{100 * e.max_large:>10.1f}%")
    return "\n".join(rows)


def provenance(fit: Fit, profiles: Profiles, *, source: str, gpu: str) -> dict:
    """The [provenance] table of a fitted coefficients file: source, files with digests, errors."""
    return {
        "status": "fitted",
        "source": source,
        "gpu": gpu,
        "method": "Levenberg-Marquardt on log(predicted/measured), per-row medians of time_stats.<op>",
        "files": [Path(f).as_posix() for f in profiles.files],
        "sha256": list(profiles.digests),
        "rows": profiles.n_rows,
        "fitted_memory_kinds": list(fit.fitted_kinds),
        "not_fitted": "attention_* (fitted to published FlashAttention figures, cosim.workload."
                      "shipped_coefficients), gemm_tile_m, gemm_tile_n (kept from the base preset; the profiles "
                      "hold no attention kernel)",
        "error": {op: e.as_dict() for op, e in fit.errors.items()},
    }


def coefficient_table(hw: HardwareSpec) -> dict[str, float | int]:
    """Every coefficient field of ``hw`` (the [coefficients] table of its file)."""
    return {name: getattr(hw, name) for name in COEFFICIENT_FIELDS}
