"""The canvas every cosim figure is drawn on: matplotlib's object API with the Agg canvas (no pyplot, no
display), one size and resolution, imported only when a figure is drawn (``cosim --help`` stays fast)."""

from __future__ import annotations

import sys

from cosim.errors import CosimInputError
from cosim.results.metrics import format_number

FIGSIZE_IN = (8.0, 4.5)
DPI = 100


def matplotlib_module():
    """The matplotlib package, or a one-line error saying how to install it (a CLI exit 2, no traceback)."""
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError:
        raise CosimInputError("matplotlib", "is not installed, and figures need it",
                              f"install it: {sys.executable} -m pip install matplotlib") from None
    return matplotlib


def figure(title: str):
    """(Figure, Axes) of one plot of the standard size with ``title``."""
    matplotlib_module()
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=FIGSIZE_IN, dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    return fig, ax


def log_axis(ax, left: float, right: float) -> None:
    """A log x axis with plain numbers (2.5, not 2.5×10⁰); minor ticks labelled when under a decade wide."""
    from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: PLC0415

    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _pos: format_number(v))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain if right / left < 10 else NullFormatter())
