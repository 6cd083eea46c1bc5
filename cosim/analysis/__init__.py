"""Analysis of results files: side-by-side comparisons, figures, HTML reports and a notebook API.

Kept import-light (no numpy, h5py, pandas or matplotlib here): each submodule imports what it needs.

- ``cosim.analysis.compare``: ``compare_runs(records)`` → CompareTable (text, JSON, CSV)
- ``cosim.analysis.plots``: headless matplotlib figures of queues, CDFs, pauses, stalls, iterations
- ``cosim.analysis.report``: one self-contained HTML page per results file
- ``cosim.results.frames``: ``open_results(path)`` → Results (runs as pandas DataFrames)
"""
