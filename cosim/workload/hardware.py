"""GPU and host specs (public datasheet numbers) and the compute-time model.

Compute time of an operation = FLOPs / (peak dense bf16 FLOP/s × compute_efficiency); the efficiency is the
achievable fraction of peak (model FLOPs utilisation of the matmuls), 0.5 by default. Memory-bound work (the
optimizer step) takes bytes / (HBM bandwidth × memory_efficiency).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cosim.errors import CosimInputError


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """One GPU type, its host, and the efficiencies the compute model assumes."""

    name: str
    peak_flops_per_s: float  #: peak dense bf16 tensor-core FLOP/s
    hbm_bytes: int  #: HBM capacity per GPU, bytes
    hbm_bytes_per_s: float  #: HBM bandwidth per GPU, bytes/s
    nvlink_bytes_per_s: float  #: NVLink bandwidth per GPU per direction, bytes/s
    gpus_per_host: int = 8  #: GPUs sharing one host (one NVLink domain)
    compute_efficiency: float = 0.5  #: achieved fraction of peak FLOP/s, in (0, 1]
    memory_efficiency: float = 0.8  #: achieved fraction of HBM bandwidth, in (0, 1]

    def __post_init__(self) -> None:
        for field in ("peak_flops_per_s", "hbm_bytes_per_s", "nvlink_bytes_per_s"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise CosimInputError(f"hardware.{field}", f"must be a positive number, got {value!r}")
        for field in ("hbm_bytes", "gpus_per_host"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CosimInputError(f"hardware.{field}", f"must be a positive integer, got {value!r}")
        for field in ("compute_efficiency", "memory_efficiency"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise CosimInputError(f"hardware.{field}", f"must be in (0, 1], got {value!r}",
                                      "use a fraction of peak such as 0.5")

    def compute_ns(self, flops: int) -> int:
        """Duration in ns of ``flops`` floating-point operations at the achievable rate (≥ 1 ns if flops > 0)."""
        if flops <= 0:
            return 0
        return max(1, round(flops * 1e9 / (self.peak_flops_per_s * self.compute_efficiency)))

    def memory_ns(self, nbytes: int) -> int:
        """Duration in ns of moving ``nbytes`` through HBM at the achievable bandwidth (≥ 1 ns if nbytes > 0)."""
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

PRESETS: dict[str, HardwareSpec] = {
    # NVIDIA A100 datasheet: 312 TFLOP/s dense bf16, 80 GB (80 GiB) HBM2e at 2,039 GB/s; NVLink 3: 600 GB/s total,
    # 300 GB/s per direction.
    "a100": HardwareSpec(name="a100", peak_flops_per_s=312e12, hbm_bytes=80 * GIB, hbm_bytes_per_s=2.039e12,
                         nvlink_bytes_per_s=300e9),
    # NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense bf16, 80 GB HBM3 at 3.35 TB/s; NVLink 4: 900 GB/s total,
    # 450 GB/s per direction.
    "h100": HardwareSpec(name="h100", peak_flops_per_s=989e12, hbm_bytes=80 * GIB, hbm_bytes_per_s=3.35e12,
                         nvlink_bytes_per_s=450e9),
    # NVIDIA H200 SXM: H100 compute with 141 GB HBM3e at 4.8 TB/s (HBM capacities are binary GB).
    "h200": HardwareSpec(name="h200", peak_flops_per_s=989e12, hbm_bytes=141 * GIB, hbm_bytes_per_s=4.8e12,
                         nvlink_bytes_per_s=450e9),
}
ALIASES = {"a100-80gb": "a100", "a100-sxm": "a100", "h100-sxm": "h100", "h200-sxm": "h200"}


def get_hardware(name: str, **overrides: object) -> HardwareSpec:
    """Return GPU preset ``name`` (case-insensitive; aliases such as ``h100-sxm``) with ``overrides`` applied."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in PRESETS:
        raise CosimInputError("hardware", f"unknown GPU preset {name!r}",
                              f"choose among {', '.join(sorted(set(PRESETS) | set(ALIASES)))}")
    spec = PRESETS[key]
    return spec.with_overrides(**overrides) if overrides else spec
