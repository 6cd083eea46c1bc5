"""Analysis of results files: figures and HTML reports (comparisons and the notebook API live in
``cosim.results``: ``cosim.results.compare``, ``cosim.results.open``).

Kept import-light (no numpy, h5py, pandas or matplotlib here): each submodule imports what it needs.

- ``cosim.analysis.plots``: headless matplotlib figures of queues, CDFs, pauses, stalls, iterations
- ``cosim.analysis.report``: one self-contained HTML page per results file
"""


def open(path):  # noqa: A001 - cosim.analysis.open(path) is cosim.results.open(path)
    """A results file as a mapping run name → Run with tables as DataFrames (see cosim.results.api)."""
    from cosim.results import open as open_results  # noqa: PLC0415 - keeps this package import-light

    return open_results(path)


open_results = open
