"""The figure of ``cosim reliability``: ETTR (and MTTF) against the job's GPU count."""

from __future__ import annotations

from collections.abc import Sequence

from cosim.analysis.canvas import DPI, FIGSIZE_IN
from cosim.analysis.plots import render
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output


def ettr_figure(points: Sequence, *, title: str):
    """ETTR against GPU count (log x) for ``points`` (:class:`cosim.reliability.JobReliability`), with
    the MTTF in hours on a second axis."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415
    except ImportError:
        raise CosimInputError("matplotlib", "is not installed, and figures need it") from None
    fig = Figure(figsize=FIGSIZE_IN, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    gpus = [p.counts.gpus for p in points]
    ax.plot(gpus, [p.ettr for p in points], marker="o", color="tab:blue", label="ETTR")
    ax.set_xscale("log")
    ax.set_xlabel("GPUs in the job")
    ax.set_ylabel("ETTR (useful / wall-clock time)", color="tab:blue")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    twin = ax.twinx()
    twin.plot(gpus, [p.mttf_h for p in points], marker="s", ls="--", color="tab:red", label="MTTF")
    twin.set_yscale("log")
    twin.set_ylabel("job MTTF (h)", color="tab:red")
    return fig


def write_figure(fig, path) -> None:
    """Write ``fig`` to ``path`` (format from its suffix: png, svg or pdf), atomically."""
    fmt = str(path).rsplit(".", 1)[-1].lower()
    if fmt not in ("png", "svg", "pdf"):
        raise CosimInputError("--plot", f"{path!r} has no .png, .svg or .pdf suffix")
    data = render(fig, fmt)
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)
