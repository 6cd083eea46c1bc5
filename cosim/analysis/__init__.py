"""Analysis of results files: side-by-side comparisons, figures, HTML reports and a notebook API.

Kept import-light (no numpy, h5py, pandas or matplotlib here): each submodule imports what it needs.

- ``cosim.analysis.compare``: ``compare_runs(records)`` → CompareTable (text, JSON, CSV)
- ``cosim.analysis.plots``: headless matplotlib figures of queues, CDFs, pauses, stalls, iterations
- ``cosim.analysis.report``: one self-contained HTML page per results file
- ``cosim.analysis.api``: ``open_results(path)`` (also ``cosim.analysis.open``) → Results (runs as pandas
  DataFrames)
"""


def open_results(path):
    """A results file as a mapping run name → Run with tables as DataFrames (see cosim.analysis.api)."""
    from cosim.analysis.api import open_results as _open  # noqa: PLC0415 - keeps this package import-light

    return _open(path)


open = open_results  # noqa: A001 - notebooks read it as cosim.analysis.open(path)
