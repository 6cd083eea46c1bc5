"""Rewrite the shipped coefficients files ``cosim/workload/calibration/<gpu>.toml`` from Vidur's profiles.

``python -m cosim.workload.shipped_coefficients VIDUR_COMPUTE_DIR`` where the directory holds
``{a100,h100}/{Llama-2-7b-hf,Llama-2-70b-hf}/mlp.csv`` (microsoft/vidur commit 7d47513, ``data/`` folder,
MIT license). A100 and H100 are fitted; H200, B200, GB200 and GB300 NVL72 have no profiles, so they
get H100's fitted coefficients: every coefficient is a fraction of a datasheet rate (or a launch time, or a
shape penalty in elements), so applying them to their datasheet numbers scales each kernel time by the
datasheet ratios. Those files say "derived, not fitted". Cosim never reads the profiles at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from cosim.workload import calibrate as cal
from cosim.workload.coefficients import format_coefficients
from cosim.workload.hardware import CALIBRATION_DIR, DATASHEETS, HardwareSpec
from cosim.workload.lsq import least_squares

SOURCE = ("microsoft/vidur commit 7d47513 (MIT license, Copyright (c) Microsoft Corporation), compute profiles "
          "of its data/ folder: {gpu}/{{Llama-2-7b-hf,Llama-2-70b-hf}}/mlp.csv; fitted 2026-12-03")
#: keys per query of the published flash-attention figures below
ATTENTION_KEYS = (512, 1024, 2048, 4096, 8192, 16384)
#: published flash-attention throughput, TFLOP/s of executed FLOPs (causal: half the score matrix), bf16,
#: head size 128, H100 80GB SXM5 (peak 989 TFLOP/s), from Shah et al. 2024 (FlashAttention-3, arXiv
#: 2407.08608, figures 5 and 6): per kernel, forward causal, forward not causal, backward not causal
ATTENTION_FIGURES = {
    "fa3": ((292, 423, 521, 579, 602, 616), (467, 565, 625, 638, 646, 648), (316, 424, 501, 542, 559, 561)),
    "fa2": ((191, 260, 298, 319, 333, 335), (309, 350, 362, 368, 370, 370), (214, 260, 291, 310, 318, 322)),
}
ATTENTION_FIGURES_PEAK = 989e12  #: the H100's dense bf16 peak the figures are taken against, FLOP/s
#: GPU → (kernel it runs, its forward non-causal efficiency at many keys where the figures are of another GPU):
#: A100 runs FlashAttention-2, which reaches up to 73 % of A100 peak forward (Dao 2023, arXiv 2307.08691); the
#: H100 figures give its shape and its backward and causal ratios. Hopper and later run FlashAttention-3.
ATTENTION_KERNELS = {"a100": ("fa2", 0.73), "h100": ("fa3", None)}
FITTED = ("a100", "h100")
DERIVED = {"h200": "h100", "b200": "h100", "gb200-nvl72": "h100", "gb300-nvl72": "h100"}
HEADER = ("Compute-model coefficients for cosim (docs/models/compute.md); regenerate with\n"
          "python -m cosim.workload.shipped_coefficients VIDUR_COMPUTE_DIR")


def _attention_curve(efficiency: np.ndarray) -> tuple[float, float, float]:
    """(plateau, half keys, exponent) of e(s) = plateau / (1 + (half/s)^exponent) fitted to ``efficiency``
    at ATTENTION_KEYS, least squares on the log ratio."""
    s = np.asarray(ATTENTION_KEYS, np.float64)

    def residuals(theta):
        plateau, half, exponent = theta
        return np.log(plateau / (1.0 + (half / s) ** exponent) / efficiency)

    start = [min(0.95, float(efficiency[-1]) * 1.02), 300.0, 1.0]
    plateau, half, exponent = least_squares(residuals, start, ["logit", "log", "log"])
    return float(plateau), float(half), float(exponent)


def attention_fields(gpu: str) -> dict[str, float]:
    """The causal attention curves of ``gpu`` (HardwareSpec fields), fitted to ATTENTION_FIGURES.

    Forward: the causal figures. Backward: the published backward is not causal, so it is scaled by the
    forward's causal / non-causal ratio at each key count. A GPU whose figures are of another GPU is scaled
    so that its forward non-causal plateau is the one given in ATTENTION_KERNELS."""
    kernel, plateau_nc = ATTENTION_KERNELS[gpu]
    fwd_c, fwd_nc, bwd_nc = (np.asarray(f, np.float64) * 1e12 / ATTENTION_FIGURES_PEAK
                             for f in ATTENTION_FIGURES[kernel])
    scale = 1.0 if plateau_nc is None else plateau_nc / _attention_curve(fwd_nc)[0]
    fwd = _attention_curve(fwd_c * scale)
    bwd = _attention_curve(bwd_nc * fwd_c / fwd_nc * scale)
    return {"attention_efficiency": round(fwd[0], 4), "attention_half_keys": round(fwd[1], 1),
            "attention_exponent": round(fwd[2], 4), "attention_bwd_efficiency": round(bwd[0], 4),
            "attention_bwd_half_keys": round(bwd[1], 1), "attention_bwd_exponent": round(bwd[2], 4)}


def base_spec(gpu: str) -> HardwareSpec:
    """The datasheet numbers of ``gpu`` with its fitted attention curves (other coefficients not yet fitted)."""
    return HardwareSpec(name=gpu, **DATASHEETS[gpu], **attention_fields(gpu))


def regenerate(vidur_compute_dir: str | Path, out_dir: Path = CALIBRATION_DIR) -> list[Path]:
    """Fit A100 and H100, derive H200, B200, GB200 and GB300 NVL72, write the six files; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written, fitted = [], {}
    for gpu in FITTED:
        root = Path(vidur_compute_dir) / gpu
        files = sorted(root.glob("*/mlp.csv"))
        profiles = cal.read_profiles(files)
        fit = cal.fit_profiles(profiles, base_spec(gpu))
        fitted[gpu] = fit
        prov = cal.provenance(fit, profiles, source=SOURCE.format(gpu=gpu), gpu=gpu)
        prov["files"] = [f"{gpu}/{Path(f).parent.name}/mlp.csv" for f in profiles.files]
        path = out_dir / f"{gpu}.toml"
        path.write_text(format_coefficients(gpu=gpu, coefficients=cal.coefficient_table(fit.hardware),
                                            provenance=prov, header=HEADER))
        written.append(path)
    for gpu, src in DERIVED.items():
        prov = {"status": "derived, not fitted",
                "source": f"{src} coefficients fitted to {SOURCE.format(gpu=src)}",
                "derivation": f"{src}'s fitted fractions of datasheet rates, launch times and shape penalties "
                              f"applied to the {gpu} datasheet numbers (no {gpu} profile was available)",
                "error": "none measured: no profile of this GPU"}
        path = out_dir / f"{gpu}.toml"
        path.write_text(format_coefficients(gpu=gpu, coefficients=cal.coefficient_table(fitted[src].hardware),
                                            provenance=prov, header=HEADER))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``VIDUR_COMPUTE_DIR`` as the only argument."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m cosim.workload.shipped_coefficients VIDUR_COMPUTE_DIR", file=sys.stderr)
        return 2
    for p in regenerate(args[0]):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
