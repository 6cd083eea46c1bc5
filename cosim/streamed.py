"""Tables produced a slice of rows at a time, for tables too large to hold whole."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np


class StreamedTable(Mapping):
    """A table whose rows are produced a slice at a time, in order, and never held whole.

    A folded run's queue log is its simulated part's copied to every part: tens of millions of rows, which
    held whole were the largest allocation of the run. The row count and the column dtypes are known up
    front, so the results writer preallocates the datasets and fills them slice by slice, and the queue
    percentile reads the log the same way. Every call of :meth:`slices` produces the rows anew (``produce``
    keeps what it builds them from).

    As a Mapping of columns, like every table of a run record, ``table[name]`` builds that column whole (a
    full pass), for the readers that need it in memory; :meth:`materialize` builds every column in one pass.
    It does not pickle: what sends a run's output to another process sends the materialized columns.

    ``copied_from``, when given, is the same log held small: (log, copies) pairs, each row of a log standing
    for ``copies[row]`` ports' rows (0: for none), every copy under another port with its time and value,
    and a port's rows in the same order as the rows they copy. A reader that sums per port (the queue
    percentile) reads these instead of producing the rows.
    """

    def __init__(self, rows: int, dtypes: Mapping[str, np.dtype],
                 produce: Callable[[], Iterable[Mapping[str, np.ndarray]]], *,
                 copied_from: Sequence[tuple[Mapping[str, np.ndarray], np.ndarray]] | None = None):
        self.rows = int(rows)
        self.dtypes = {name: np.dtype(d) for name, d in dtypes.items()}
        self._produce = produce
        self.copied_from = copied_from

    def slices(self) -> Iterator[dict[str, np.ndarray]]:
        """The rows in order, a slice at a time: every column of a slice as an array of its dtype."""
        done = 0
        for part in self._produce():
            cols = {name: np.asarray(part[name]).astype(d, copy=False) for name, d in self.dtypes.items()}
            n = next(iter(cols.values())).size if cols else 0
            assert all(c.shape == (n,) for c in cols.values()), "a slice's columns differ in length"
            done += n
            assert done <= self.rows, f"more rows than the {self.rows} announced"
            yield cols
        assert done == self.rows, f"{done} rows produced, {self.rows} announced"

    def materialize(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Every column whole (or those ``names``), in one pass."""
        names = list(self.dtypes if names is None else names)
        out = {name: np.empty(self.rows, self.dtypes[name]) for name in names}
        at = 0
        for part in self.slices():
            n = next(iter(part.values())).size
            for name in names:
                out[name][at:at + n] = part[name]
            at += n
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the table held whole."""
        return self.rows * sum(d.itemsize for d in self.dtypes.values())

    def __getitem__(self, name: str) -> np.ndarray:
        return self.materialize((name,))[name]

    def __contains__(self, name: object) -> bool:
        return name in self.dtypes

    def __iter__(self) -> Iterator[str]:
        return iter(self.dtypes)

    def __len__(self) -> int:
        return len(self.dtypes)


def table_slices(table: Mapping[str, np.ndarray], slice_rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The rows of ``table`` in order, a slice at a time: a StreamedTable's own slices, else ``slice_rows``
    rows of every column at a time."""
    if isinstance(table, StreamedTable):
        yield from table.slices()
        return
    cols = {name: np.asarray(col) for name, col in table.items()}
    n = next(iter(cols.values())).size if cols else 0
    for lo in range(0, n, slice_rows):
        yield {name: col[lo:lo + slice_rows] for name, col in cols.items()}


def table_rows(table: Mapping[str, np.ndarray]) -> int:
    """Rows of ``table`` (a StreamedTable's without producing them)."""
    if isinstance(table, StreamedTable):
        return table.rows
    return int(np.asarray(next(iter(table.values()))).size) if len(table) else 0
