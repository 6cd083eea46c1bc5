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

from cosim.workload import calibrate as cal
from cosim.workload.coefficients import format_coefficients
from cosim.workload.hardware import CALIBRATION_DIR, DATASHEETS, HardwareSpec

SOURCE = ("microsoft/vidur commit 7d47513 (MIT license, Copyright (c) Microsoft Corporation), compute profiles "
          "of its data/ folder: {gpu}/{{Llama-2-7b-hf,Llama-2-70b-hf}}/mlp.csv; fitted 2026-12-03")
#: flash-attention efficiencies (fraction of peak of the executed, causal FLOPs), chosen, not fitted:
#: FlashAttention-2 (Dao 2023) reaches 50-73 % of A100 peak forward and less backward; on H100 it reaches
#: about 35 %, FlashAttention-3 (Shah et al. 2024) up to 75 % forward in bf16 (740 TFLOP/s); training
#: stacks (cuDNN / Transformer Engine fused attention) sit between, backward below forward.
ATTENTION = {"a100": (0.6, 0.5), "h100": (0.55, 0.4)}
FITTED = ("a100", "h100")
DERIVED = {"h200": "h100", "b200": "h100", "gb200-nvl72": "h100", "gb300-nvl72": "h100"}
HEADER = ("Compute-model coefficients for cosim (docs/models/compute.md); regenerate with\n"
          "python -m cosim.workload.shipped_coefficients VIDUR_COMPUTE_DIR")


def base_spec(gpu: str) -> HardwareSpec:
    """The datasheet numbers of ``gpu`` with the chosen attention efficiencies (coefficients not yet fitted)."""
    fwd, bwd = ATTENTION[gpu]
    return HardwareSpec(name=gpu, **DATASHEETS[gpu], attention_efficiency=fwd, attention_bwd_efficiency=bwd)


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
