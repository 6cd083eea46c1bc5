"""GPU and host specs: public datasheet numbers plus the fitted coefficients of the compute model.

A :class:`HardwareSpec` holds what the datasheet says (peak dense bf16 FLOP/s, HBM capacity and bandwidth,
NVLink and NIC bandwidth per GPU, SM count) and the coefficients of the per-operator compute model of
:mod:`cosim.workload.compute` (GEMM efficiency and shape penalties, flash-attention efficiency, HBM
efficiency and launch overhead of each kind of memory-bound operator). Presets take their coefficients
from ``cosim/workload/calibration/<gpu>.toml`` (fitted by ``cosim calibrate`` to measured kernel
profiles, with their provenance); :func:`get_hardware` also accepts the path of such a file.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from cosim.errors import CosimInputError
from cosim.workload.coefficients import (
    check_document,
    read_coefficients,
)

#: fields in (0, 1]: fractions of a datasheet rate
FRACTION_FIELDS = ("sustained_clock_ratio", "compute_efficiency", "gemm_memory_efficiency", "attention_efficiency",
                   "attention_bwd_efficiency", "memory_efficiency", "norm_memory_efficiency",
                   "rope_memory_efficiency", "activation_memory_efficiency", "embedding_memory_efficiency")
#: fields ≥ 0: durations (ns) and dimensions (elements)
NONNEGATIVE_FIELDS = ("gemm_small_m", "gemm_small_n", "gemm_small_k", "gemm_launch_ns", "memory_launch_ns",
                      "norm_launch_ns", "rope_launch_ns", "activation_launch_ns", "embedding_launch_ns",
                      "attention_half_keys", "attention_bwd_half_keys")
#: fields > 0 (exponents)
POSITIVE_FIELDS = ("attention_exponent", "attention_bwd_exponent")
def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """One GPU type and its host: datasheet numbers and compute-model coefficients (module docstring).

    Coefficient defaults are round, uncalibrated values; the presets replace them with fitted ones.
    """

    #: fields a trace records only when a run uses them (FP8 GEMMs): see ModelSpec.TRACE_OPTIONAL_FIELDS
    TRACE_OPTIONAL_FIELDS: ClassVar[tuple[str, ...]] = (
        "fp8_peak_flops_per_s", "fp8_tensor_scaling_overhead", "fp8_block_scaling_overhead")

    name: str
    peak_flops_per_s: float  #: peak dense bf16 tensor-core FLOP/s
    hbm_bytes: int  #: HBM capacity per GPU, bytes
    hbm_bytes_per_s: float  #: HBM bandwidth per GPU, bytes/s
    nvlink_bytes_per_s: float  #: NVLink bandwidth per GPU per direction, bytes/s
    nic_bytes_per_s: float = 50e9  #: scale-out NIC bandwidth per GPU per direction, bytes/s
    sm_count: int = 132  #: streaming multiprocessors (GEMM wave quantization)
    gpus_per_host: int = 8  #: GPUs sharing one host (one NVLink domain)
    #: SMs NCCL's kernels hold while a collective or send runs on the GPU: one thread block per channel,
    #: two channels per NIC of an 8-NIC server (cosim's rings, NCCL's default there); the GPU's compute runs
    #: on the rest meanwhile (DagExecutor::CommComputeSlowdown = nccl_sms / sm_count). 0: no interference.
    nccl_sms: int = 16
    #: SMs DeepEP's high-throughput kernels hold while a dispatch or combine runs: 20, what DeepSeek-V3's
    #: report (arXiv 2412.19437, section 3.2.2) gives its all-to-all kernels on H800's 132 SMs
    #: (DagExecutor::ExpertCommComputeSlowdown = deepep_sms / sm_count). The low-latency kernels hold none.
    deepep_sms: int = 20
    #: SM clock a long run sustains, as a fraction of the clock the kernel profiles ran at, (0, 1]: under a
    #: full tensor-core load a GPU meets its power limit and lowers its clock below boost, while profiles of
    #: one kernel at a time run at boost. Compute-bound time (the GEMM FLOP term, flash attention) scales by
    #: its inverse; HBM-bound time and launch terms do not. 1: the profiles' clock (docs/models/compute.md).
    sustained_clock_ratio: float = 1.0
    # GEMM (cosim.workload.compute.gemm_time_ns)
    compute_efficiency: float = 0.75  #: GEMM FLOP/s of large well-shaped GEMMs as a fraction of peak, (0, 1]
    gemm_memory_efficiency: float = 0.8  #: fraction of HBM bandwidth GEMM operand traffic reaches, (0, 1]
    gemm_small_m: float = 100.0  #: small-M penalty M0: time × (1 + M0/M), elements
    gemm_small_n: float = 100.0  #: small-N penalty N0, elements
    gemm_small_k: float = 40.0  #: small-K penalty K0 (tile prologue/epilogue), elements
    gemm_wave_weight: float = 0.2  #: exponent in [0, 1] of the wave-quantization factor
    gemm_roofline_sharpness: float = 4.0  #: p ≥ 1 of the smooth max of compute and memory rooflines
    gemm_launch_ns: float = 5000.0  #: fixed time per GEMM (launch, tail), ns
    gemm_tile_m: int = 128  #: output tile rows for wave quantization, elements
    gemm_tile_n: int = 128  #: output tile columns for wave quantization, elements
    # causal flash attention against the keys per query (cosim.workload.compute.attention_efficiency), fitted
    # to published FlashAttention benchmarks (the kernel profiles hold no attention kernel)
    attention_efficiency: float = 0.6  #: forward flash attention at many keys, fraction of peak of executed FLOPs
    attention_bwd_efficiency: float = 0.45  #: backward flash attention at many keys, fraction of peak
    attention_half_keys: float = 0.0  #: keys per query at which the forward reaches half its efficiency (0: flat)
    attention_exponent: float = 1.0  #: how sharply the forward's efficiency rises with the keys, > 0
    attention_bwd_half_keys: float = 0.0  #: keys per query at which the backward reaches half its efficiency
    attention_bwd_exponent: float = 1.0  #: how sharply the backward's efficiency rises with the keys, > 0
    # memory-bound operators (cosim.workload.compute.stream_time_ns)
    memory_efficiency: float = 0.8  #: elementwise ops (residual add, loss, optimizer step), fraction of HBM
    memory_launch_ns: float = 2000.0  #: fixed time per elementwise op, ns
    norm_memory_efficiency: float = 0.4  #: RMSNorm/LayerNorm, fraction of HBM bandwidth
    norm_launch_ns: float = 3000.0  #: fixed time per norm, ns
    rope_memory_efficiency: float = 0.5  #: rotary embedding, fraction of HBM bandwidth
    rope_launch_ns: float = 2500.0  #: fixed time per rotary embedding, ns
    activation_memory_efficiency: float = 0.5  #: SwiGLU/GELU, fraction of HBM bandwidth
    activation_launch_ns: float = 2500.0  #: fixed time per activation, ns
    embedding_memory_efficiency: float = 0.15  #: embedding lookup (row gather), fraction of HBM bandwidth
    embedding_launch_ns: float = 3500.0  #: fixed time per embedding lookup, ns
    calibration: str = "uncalibrated defaults"  #: where the coefficients come from (provenance summary)
    # FP8 GEMMs (cosim.workload.compute.fp8_gemm_ns): datasheet peak and the scaling recipes' overheads
    fp8_peak_flops_per_s: float = 0.0  #: peak dense FP8 tensor-core FLOP/s; 0 = no FP8 tensor cores
    fp8_tensor_scaling_overhead: float = 0.05  #: per-tensor scaling work, fraction of the FP8 GEMM time, [0, 1]
    fp8_block_scaling_overhead: float = 0.12  #: fine-grained block scaling work, fraction of FP8 GEMM time, [0, 1]
    # scale-up domain (the NVLink/NVSwitch domain a host stands for: a server, or an NVL72 rack)
    nvlink_latency_ns: float = 500.0  #: fixed latency of one NVLink copy through the domain's switch, ns
    nvls: bool = False  #: the domain's switches reduce in the network (NVLink SHARP: NCCL's NVLS all-reduce)

    def __post_init__(self) -> None:
        for field in ("peak_flops_per_s", "hbm_bytes_per_s", "nvlink_bytes_per_s", "nic_bytes_per_s"):
            value = getattr(self, field)
            if not _is_number(value) or not value > 0:
                raise CosimInputError(f"hardware.{field}", f"must be a positive number, got {value!r}")
        for field in ("hbm_bytes", "gpus_per_host", "sm_count", "gemm_tile_m", "gemm_tile_n"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CosimInputError(f"hardware.{field}", f"must be a positive integer, got {value!r}")
        for field in FRACTION_FIELDS:
            value = getattr(self, field)
            if not _is_number(value) or not 0 < value <= 1:
                raise CosimInputError(f"hardware.{field}", f"must be in (0, 1], got {value!r}",
                                      "use a fraction of the datasheet rate such as 0.5")
        for field in NONNEGATIVE_FIELDS:
            value = getattr(self, field)
            if not _is_number(value) or not 0 <= value < 1e12:
                raise CosimInputError(f"hardware.{field}", f"must be a number ≥ 0, got {value!r}")
        for field in POSITIVE_FIELDS:
            value = getattr(self, field)
            if not _is_number(value) or not 0 < value <= 16:
                raise CosimInputError(f"hardware.{field}", f"must be in (0, 16], got {value!r}")
        for field, advice in (("nccl_sms", "use the thread blocks NCCL launches per collective (its channel count)"),
                              ("deepep_sms", "use the SMs DeepEP's high-throughput kernels are given (num_sms)")):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.sm_count:
                raise CosimInputError(f"hardware.{field}", f"must be an integer in [0, sm_count), got {value!r}",
                                      advice)
        if not _is_number(self.gemm_wave_weight) or not 0 <= self.gemm_wave_weight <= 1:
            raise CosimInputError("hardware.gemm_wave_weight", f"must be in [0, 1], got {self.gemm_wave_weight!r}")
        if not _is_number(self.gemm_roofline_sharpness) or not 1 <= self.gemm_roofline_sharpness <= 1000:
            raise CosimInputError("hardware.gemm_roofline_sharpness",
                                  f"must be in [1, 1000], got {self.gemm_roofline_sharpness!r}")
        if not _is_number(self.fp8_peak_flops_per_s) or not 0 <= self.fp8_peak_flops_per_s < 1e18:
            raise CosimInputError("hardware.fp8_peak_flops_per_s", f"must be a number ≥ 0, got "
                                  f"{self.fp8_peak_flops_per_s!r}", "use the datasheet's dense FP8 FLOP/s, 0 for none")
        for field in ("fp8_tensor_scaling_overhead", "fp8_block_scaling_overhead"):
            value = getattr(self, field)
            if not _is_number(value) or not 0 <= value <= 1:
                raise CosimInputError(f"hardware.{field}", f"must be in [0, 1], got {value!r}",
                                      "give the recipe's extra work as a fraction of the GEMM time, e.g. 0.1")
        if not _is_number(self.nvlink_latency_ns) or not 0 <= self.nvlink_latency_ns < 1e9:
            raise CosimInputError("hardware.nvlink_latency_ns", f"must be a number of ns >= 0, got "
                                  f"{self.nvlink_latency_ns!r}")
        if not isinstance(self.nvls, bool):
            raise CosimInputError("hardware.nvls", f"must be true or false, got {self.nvls!r}")
        if not isinstance(self.calibration, str):
            raise CosimInputError("hardware.calibration", f"must be text, got {self.calibration!r}")

    @property
    def clocked_flops_per_s(self) -> float:
        """Dense bf16 FLOP/s at the sustained clock: the peak compute-bound kernels are timed against."""
        return self.peak_flops_per_s * self.sustained_clock_ratio

    @property
    def fp8_flops_per_s(self) -> float:
        """Dense FP8 FLOP/s at the sustained clock; CosimInputError if the GPU has no FP8 tensor cores."""
        if not self.fp8_peak_flops_per_s:
            raise CosimInputError("model.gemm_precision", f"{self.name} has no FP8 tensor cores",
                                  "use gemm_precision = \"bf16\" or an FP8 GPU (h100, h200, b200)")
        return self.fp8_peak_flops_per_s * self.sustained_clock_ratio

    def compute_ns(self, flops: int) -> int:
        """Duration in ns of ``flops`` FLOPs at ``compute_efficiency`` of peak (≥ 1 ns if flops > 0)."""
        if flops <= 0:
            return 0
        return max(1, round(flops * 1e9 / (self.clocked_flops_per_s * self.compute_efficiency)))

    def memory_ns(self, nbytes: int) -> int:
        """Duration in ns of streaming ``nbytes`` through HBM at ``memory_efficiency`` (≥ 1 ns if > 0)."""
        if nbytes <= 0:
            return 0
        return max(1, round(nbytes * 1e9 / (self.hbm_bytes_per_s * self.memory_efficiency)))

    def with_overrides(self, **fields: object) -> HardwareSpec:
        """Return a copy with ``fields`` replaced (validated again); unknown names raise CosimInputError."""
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise CosimInputError(f"hardware.{unknown[0]}", "is not a hardware field", f"choose among {', '.join(names)}")
        return dataclasses.replace(self, **fields)


GIB = 1 << 30

#: datasheet numbers (NVIDIA product datasheets; HBM capacities counted as binary GB). NIC: the scale-out
#: NIC per GPU of the reference DGX/HGX system of each generation.
DATASHEETS: dict[str, dict[str, float | int]] = {
    # A100 SXM4 80GB: 312 TFLOP/s dense bf16, 80 GB HBM2e at 2,039 GB/s, NVLink 3 600 GB/s total (300 per
    # direction), 108 SMs; DGX A100: one ConnectX-6 HDR 200 Gb/s per GPU.
    "a100": dict(peak_flops_per_s=312e12, hbm_bytes=80 * GIB, hbm_bytes_per_s=2.039e12, nvlink_bytes_per_s=300e9,
                 nic_bytes_per_s=25e9, sm_count=108),
    # H100 SXM5: 989 TFLOP/s dense bf16, 80 GB HBM3 at 3.35 TB/s, NVLink 4 900 GB/s total (450 per direction),
    # 132 SMs; DGX H100: one ConnectX-7 400 Gb/s per GPU.
    # Dense FP8 (Hopper, Blackwell): twice the bf16 rate, 1,979 TFLOP/s on H100/H200, 4.5 PFLOP/s on B200.
    "h100": dict(peak_flops_per_s=989e12, hbm_bytes=80 * GIB, hbm_bytes_per_s=3.35e12, nvlink_bytes_per_s=450e9,
                 nic_bytes_per_s=50e9, sm_count=132, fp8_peak_flops_per_s=1979e12),
    # H200 SXM: H100 compute (989 TFLOP/s, 132 SMs) with 141 GB HBM3e at 4.8 TB/s, NVLink 4; ConnectX-7 400 Gb/s.
    "h200": dict(peak_flops_per_s=989e12, hbm_bytes=141 * GIB, hbm_bytes_per_s=4.8e12, nvlink_bytes_per_s=450e9,
                 nic_bytes_per_s=50e9, sm_count=132, fp8_peak_flops_per_s=1979e12),
    # B200 (HGX/DGX B200): 2.25 PFLOP/s dense bf16 (4.5 with sparsity), 180 GB HBM3e at 8 TB/s, NVLink 5
    # 1.8 TB/s total (900 GB/s per direction), 148 SMs; DGX B200: one ConnectX-7 400 Gb/s per GPU.
    "b200": dict(peak_flops_per_s=2.25e15, hbm_bytes=180 * GIB, hbm_bytes_per_s=8e12, nvlink_bytes_per_s=900e9,
                 nic_bytes_per_s=50e9, sm_count=148, fp8_peak_flops_per_s=4.5e15),
    # GB200 NVL72 (one rack = one NVLink domain of 72 Blackwell GPUs behind 18 NVLink Switch chips in 9
    # switch trays; NVIDIA GB200 NVL72 datasheet): 180 PFLOP/s dense fp16/bf16 per rack = 2.5 PFLOP/s per
    # GPU, 13.4 TB HBM3e per rack = 186 GB per GPU at 8 TB/s, NVLink 5 1.8 TB/s per GPU (900 GB/s per
    # direction) to every GPU of the rack, 148 SMs (a B200 die pair); one ConnectX-7 400 Gb/s per GPU for
    # scale-out (NVIDIA's GB200 NVL72 reference design). A copy crosses one NVLink switch as in an HGX
    # server (no port-to-port latency is published: the 500 ns default copy latency). The switches reduce
    # in the network (NVLink SHARP), so NCCL runs its NVLS all-reduce inside the rack.
    "gb200-nvl72": dict(peak_flops_per_s=2.5e15, hbm_bytes=186 * GIB, hbm_bytes_per_s=8e12,
                        nvlink_bytes_per_s=900e9, nic_bytes_per_s=50e9, sm_count=148, gpus_per_host=72,
                        nvlink_latency_ns=500.0, nvls=True, fp8_peak_flops_per_s=5e15),
    # GB300 NVL72 (Blackwell Ultra; NVIDIA GB300 NVL72 datasheet): the same rack and NVLink 5 domain, 180 PFLOP/s
    # dense fp16/bf16 per rack = 2.5 PFLOP/s per GPU, 20 TB HBM3e per rack = 279 GB per GPU at 8 TB/s,
    # 160 SMs (Blackwell Ultra), one ConnectX-8 800 Gb/s SuperNIC per GPU.
    "gb300-nvl72": dict(peak_flops_per_s=2.5e15, hbm_bytes=279 * GIB, hbm_bytes_per_s=8e12,
                        nvlink_bytes_per_s=900e9, nic_bytes_per_s=100e9, sm_count=160, gpus_per_host=72,
                        nvlink_latency_ns=500.0, nvls=True, fp8_peak_flops_per_s=5e15),
}
ALIASES = {"a100-80gb": "a100", "a100-sxm": "a100", "h100-sxm": "h100", "h200-sxm": "h200", "b200-sxm": "b200",
           "gb200": "gb200-nvl72", "nvl72": "gb200-nvl72", "gb300": "gb300-nvl72"}
CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"


def spec_from_coefficients(doc: dict, *, where: str) -> HardwareSpec:
    """The HardwareSpec a parsed coefficients document describes (its base preset's datasheet, its
    [datasheet] overrides, its [coefficients]); ``where`` names the source in errors."""
    base, datasheet, coefficients, calibration = check_document(doc, where=where)
    if base not in DATASHEETS:
        raise CosimInputError(f"{where}: gpu", f"unknown GPU preset {base!r}",
                              f"choose among {', '.join(sorted(DATASHEETS))}")
    fields = {**DATASHEETS[base], **datasheet, **coefficients}
    try:
        return HardwareSpec(name=base, calibration=calibration, **fields)
    except CosimInputError as exc:
        raise CosimInputError(f"{where}: {exc.field}", exc.problem, exc.fix) from None


@functools.lru_cache(maxsize=None)
def _preset(key: str) -> HardwareSpec:
    import tomllib

    path = CALIBRATION_DIR / f"{key}.toml"
    with open(path, "rb") as fh:
        doc = tomllib.load(fh)
    return spec_from_coefficients(doc, where=str(path))


@functools.lru_cache(maxsize=64)
def _from_file(path: str, mtime_ns: int) -> HardwareSpec:
    return spec_from_coefficients(read_coefficients(path), where=path)


def preset_names() -> list[str]:
    """GPU preset names, in datasheet order."""
    return list(DATASHEETS)


def get_hardware(name: str, **overrides: object) -> HardwareSpec:
    """Return GPU preset ``name`` (case-insensitive; aliases such as ``h100-sxm``), or the GPU a coefficients
    file (``cosim calibrate -o FILE.toml``) describes, with ``overrides`` applied."""
    if name.lower().endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise CosimInputError("hardware", f"no coefficients file {name!r}",
                                  "give a GPU preset name or a file written by cosim calibrate")
        spec = _from_file(str(path), path.stat().st_mtime_ns)
    else:
        key = ALIASES.get(name.lower(), name.lower())
        if key not in DATASHEETS:
            raise CosimInputError("hardware", f"unknown GPU preset {name!r}",
                                  f"choose among {', '.join(sorted(set(DATASHEETS) | set(ALIASES)))}, or give "
                                  "a coefficients file (cosim calibrate)")
        spec = _preset(key)
    return spec.with_overrides(**overrides) if overrides else spec
