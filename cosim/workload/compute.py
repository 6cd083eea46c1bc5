"""Per-operator compute-time model: the duration of one GPU kernel from its shape and a HardwareSpec.

Three kinds of kernel (bf16 operands, 2 B per element):

GEMM ``C[M,N] = A[M,K]·B[K,N]`` (``Gemm``)::

    area   = (M + M0)·(N + N0)                   output area with the small-dimension penalties
    waves  = ceil(T/SMs)·SMs·Tm·Tn  if T > SMs else T·Tm·Tn,   T = ceil(M/Tm)·ceil(N/Tn) output tiles
    t_flop = 2·area^(1-w)·waves^w·(K + K0) / (peak · compute_efficiency)
    t_mem  = 2·(M·K + K·N + M·N) / (hbm · gemm_memory_efficiency)
    t      = (t_flop^p + t_mem^p)^(1/p) + gemm_launch_ns

  ``waves`` is the tile area the SMs sweep when every wave of tiles takes as long as a full one (wave
  quantization; with fewer tiles than SMs split-K spreads them, leaving only the tile padding); the fitted
  weight w in [0, 1] blends it geometrically with the smooth area, as cuBLAS softens the steps by choosing
  among tile shapes. M0, N0, K0 (elements) are small-dimension penalties (under-filled tiles, prologue and
  epilogue). Both factors grow with every dimension, so the time does too. The smooth maximum of the
  compute and memory rooflines with fitted sharpness p ≥ 1 (p → ∞ is the plain max) covers the middle
  sizes that reach neither roofline. A grouped GEMM (MoE experts, ``count`` > 1) is ``count`` GEMMs
  sharing one launch.

  FP8 GEMMs (``Gemm.precision`` "fp8-tensor" or "fp8-block", the linear layers of an FP8 recipe) run the
  same formula at the FP8 peak (``fp8_peak_flops_per_s``) with 1-byte operands, and the scaling recipe's
  work on top as a fraction of the GEMM time (launch excluded)::

    t_fp8 = (t(peak_fp8, 1 B/element) − launch)·(1 + overhead) + launch

  overhead = ``fp8_tensor_scaling_overhead`` (per-tensor scaling: amax reductions and casts) or
  ``fp8_block_scaling_overhead`` (fine-grained 1×128 / 128×128 block scales: dequantization per tile and
  the promotion of partial sums to FP32 every 128 elements of K).

Memory-bound operator (``Stream``: norms, rotary embedding, activation, residual add, embedding lookup,
cross-entropy, MoE permutation, optimizer step)::

    t = bytes / (hbm · <kind>_memory_efficiency) + <kind>_launch_ns

  with one fitted (efficiency, launch) pair per kind of STREAM_KINDS.

Flash attention (``Attention``): executed FLOPs 4·n_q·n_k·heads·d, halved by a causal mask (blocks above
the diagonal are skipped), and 2.5× that in backward (FlashAttention recomputes Q·Kᵀ: five matmuls
instead of two); time = FLOPs / (peak · e) + gemm_launch_ns, with the kernel's efficiency rising with the
number of keys s each query attends to (short sequences leave the tensor cores under-fed)::

    e(s) = attention[_bwd]_efficiency / (1 + (attention[_bwd]_half_keys / s)^attention[_bwd]_exponent)

  fitted to published FlashAttention benchmark figures (docs/models/compute.md) for causal kernels, the
  ones training runs; a half-keys of 0 is a flat efficiency. A kernel without the causal mask is costed as
  the causal one at twice the keys (the same work per query block) times NONCAUSAL_GAIN.

Everything is numpy-vectorised: the ``*_time_ns`` functions take arrays and the coefficients explicitly
(the fit in :mod:`cosim.workload.calibrate` calls them with trial coefficients); ``kernel_ns`` and
``kernels_ns`` apply a HardwareSpec.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from cosim.workload.hardware import HardwareSpec

ELEMENT_BYTES = 2  #: bf16 operand element
FP8_ELEMENT_BYTES = 1  #: FP8 (e4m3/e5m2) operand element
GEMM_PRECISIONS = ("bf16", "fp8-tensor", "fp8-block")
#: kinds of memory-bound operator, each with its own fitted HBM efficiency and launch overhead
STREAM_KINDS = ("elementwise", "norm", "rope", "activation", "embedding")
CAUSAL_FRACTION = 0.5  #: share of the score matrix a causal flash-attention kernel computes
ATTENTION_BWD_FLOPS_RATIO = 2.5  #: FlashAttention backward = 5 matmuls of the forward's 2
#: a non-causal flash-attention kernel's efficiency over the causal one's at twice its keys: FlashAttention-3
#: forward on H100 (Shah et al. 2024, head size 128) gives 1.00–1.10 from 512 to 16k keys
NONCAUSAL_GAIN = 1.05


@dataclass(frozen=True, slots=True)
class Gemm:
    """``count`` independent GEMMs C[m,n] = A[m,k]·B[k,n] (count > 1: a grouped GEMM, one launch), in
    ``precision`` (GEMM_PRECISIONS)."""

    m: int
    n: int
    k: int
    count: int = 1
    precision: str = "bf16"

    @property
    def flops(self) -> int:
        """2·m·n·k·count."""
        return 2 * self.m * self.n * self.k * self.count

    def dgrad(self) -> Gemm:
        """Input gradient dA[m,k] = dC[m,n]·Bᵀ."""
        return Gemm(self.m, self.k, self.n, self.count, self.precision)

    def wgrad(self) -> Gemm:
        """Weight gradient dB[k,n] = Aᵀ·dC (the reduction runs over the m tokens)."""
        return Gemm(self.k, self.n, self.m, self.count, self.precision)


@dataclass(frozen=True, slots=True)
class Stream:
    """A memory-bound operator of kind ``kind`` (STREAM_KINDS) moving ``nbytes`` through HBM."""

    kind: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class Attention:
    """Flash attention of ``queries`` × ``keys`` tokens over ``heads`` heads of size ``head_dim``."""

    queries: int
    keys: int
    heads: int
    head_dim: int
    causal: bool = True
    backward: bool = False
    #: keys before the queries' own that every query sees whole (the first half of a sequence split in two
    #: token halves, when the second half runs), beside the ``keys`` the causal mask covers
    past_keys: int = 0

    @property
    def executed_flops(self) -> float:
        """FLOPs the kernel performs: 4·n_q·n_k·heads·d, × CAUSAL_FRACTION, × 2.5 in backward; with past
        keys 4·n_q·(past + CAUSAL_FRACTION·n_k)·heads·d (× 2.5)."""
        if self.past_keys:
            keys = self.past_keys + self.keys * (CAUSAL_FRACTION if self.causal else 1.0)
            f = 4.0 * self.queries * keys * self.heads * self.head_dim
        else:
            f = 4.0 * self.queries * self.keys * self.heads * self.head_dim
            f *= CAUSAL_FRACTION if self.causal else 1.0
        return f * (ATTENTION_BWD_FLOPS_RATIO if self.backward else 1.0)

    @property
    def span_keys(self) -> int:
        """Keys the last query attends to (past and own): what sets the kernel's efficiency."""
        return self.keys + self.past_keys


Kernel = Gemm | Stream | Attention


def gemm_time_ns(m, n, k, *, peak_flops_per_s: float, hbm_bytes_per_s: float, sm_count: int,
                 compute_efficiency: float, memory_efficiency: float, small_m: float, small_n: float,
                 small_k: float, wave_weight: float, sharpness: float, launch_ns: float, tile_m: int,
                 tile_n: int, element_bytes: int = ELEMENT_BYTES) -> np.ndarray:
    """Time in ns of GEMMs of shapes (m, n, k) (arrays), formula in the module docstring."""
    m, n, k = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    tiles = np.ceil(m / tile_m) * np.ceil(n / tile_n)
    waves = np.where(tiles > sm_count, np.ceil(tiles / sm_count) * sm_count, tiles) * (tile_m * tile_n)
    area = (m + small_m) * (n + small_n)
    work = area ** (1.0 - wave_weight) * waves ** wave_weight * (k + small_k)
    t_flop = 2.0 * work * 1e9 / (peak_flops_per_s * compute_efficiency)
    t_mem = element_bytes * (m * k + k * n + m * n) * 1e9 / (hbm_bytes_per_s * memory_efficiency)
    # scale before the power so large exponents cannot overflow
    top = np.maximum(t_flop, t_mem)
    smooth = top * ((t_flop / top) ** sharpness + (t_mem / top) ** sharpness) ** (1.0 / sharpness)
    return smooth + launch_ns


def stream_time_ns(nbytes, *, hbm_bytes_per_s: float, efficiency: float, launch_ns: float) -> np.ndarray:
    """Time in ns of memory-bound operators moving ``nbytes`` (array): bytes / (hbm · eff) + launch."""
    return np.asarray(nbytes, dtype=np.float64) * 1e9 / (hbm_bytes_per_s * efficiency) + launch_ns


def gemm_coefficients(hw: HardwareSpec) -> dict[str, float]:
    """The keyword arguments of :func:`gemm_time_ns` that ``hw`` sets."""
    return dict(peak_flops_per_s=hw.clocked_flops_per_s, hbm_bytes_per_s=hw.hbm_bytes_per_s, sm_count=hw.sm_count,
                compute_efficiency=hw.compute_efficiency, memory_efficiency=hw.gemm_memory_efficiency,
                small_m=hw.gemm_small_m, small_n=hw.gemm_small_n, small_k=hw.gemm_small_k,
                wave_weight=hw.gemm_wave_weight, sharpness=hw.gemm_roofline_sharpness,
                launch_ns=hw.gemm_launch_ns, tile_m=hw.gemm_tile_m, tile_n=hw.gemm_tile_n)


def stream_coefficients(hw: HardwareSpec, kind: str) -> tuple[float, float]:
    """(HBM efficiency, launch ns) of memory-bound kind ``kind`` on ``hw``."""
    if kind not in STREAM_KINDS:
        raise ValueError(f"unknown memory-bound kind {kind!r}; choose among {', '.join(STREAM_KINDS)}")
    if kind == "elementwise":
        return hw.memory_efficiency, hw.memory_launch_ns
    return getattr(hw, f"{kind}_memory_efficiency"), getattr(hw, f"{kind}_launch_ns")


def kernel_ns(hw: HardwareSpec, kernel: Kernel) -> float:
    """Predicted duration in ns (float) of one kernel on ``hw``."""
    if isinstance(kernel, Gemm):
        if kernel.precision == "bf16":
            one = float(gemm_time_ns(kernel.m, kernel.n, kernel.k, **gemm_coefficients(hw)))
        else:
            one = fp8_gemm_ns(hw, kernel)
        return kernel.count * one - (kernel.count - 1) * hw.gemm_launch_ns
    if isinstance(kernel, Stream):
        eff, launch = stream_coefficients(hw, kernel.kind)
        return float(stream_time_ns(kernel.nbytes, hbm_bytes_per_s=hw.hbm_bytes_per_s, efficiency=eff,
                                    launch_ns=launch))
    if isinstance(kernel, Attention):
        eff = attention_efficiency(hw, kernel.span_keys, causal=kernel.causal, backward=kernel.backward)
        return kernel.executed_flops * 1e9 / (hw.clocked_flops_per_s * float(eff)) + hw.gemm_launch_ns
    raise TypeError(f"not a kernel: {kernel!r}")


def attention_efficiency(hw: HardwareSpec, keys, *, causal: bool = True, backward: bool = False) -> np.ndarray:
    """Fraction of peak a flash-attention kernel reaches over ``keys`` keys per query (array), formula in
    the module docstring."""
    if backward:
        plateau, half, exponent = hw.attention_bwd_efficiency, hw.attention_bwd_half_keys, hw.attention_bwd_exponent
    else:
        plateau, half, exponent = hw.attention_efficiency, hw.attention_half_keys, hw.attention_exponent
    s = np.maximum(np.asarray(keys, np.float64), 1.0) * (1.0 if causal else 2.0)
    e = plateau / (1.0 + (half / s) ** exponent)
    return e if causal else np.minimum(e * NONCAUSAL_GAIN, 1.0)


def fp8_gemm_ns(hw: HardwareSpec, gemm: Gemm) -> float:
    """Time in ns of one FP8 GEMM of ``gemm``'s shape under its scaling recipe (module docstring)."""
    if gemm.precision not in GEMM_PRECISIONS[1:]:
        raise ValueError(f"not an FP8 precision: {gemm.precision!r}")
    coefficients = gemm_coefficients(hw) | dict(peak_flops_per_s=hw.fp8_flops_per_s, element_bytes=FP8_ELEMENT_BYTES)
    t = float(gemm_time_ns(gemm.m, gemm.n, gemm.k, **coefficients))
    overhead = hw.fp8_tensor_scaling_overhead if gemm.precision == "fp8-tensor" else hw.fp8_block_scaling_overhead
    return (t - hw.gemm_launch_ns) * (1.0 + overhead) + hw.gemm_launch_ns


def kernels_ns(hw: HardwareSpec, kernels: Iterable[Kernel]) -> int:
    """Duration in whole ns of kernels run back to back on one stream (0 for none, else ≥ 1)."""
    total = 0.0
    any_kernel = False
    for k in kernels:
        total += kernel_ns(hw, k)
        any_kernel = True
    return max(1, round(total)) if any_kernel else 0
