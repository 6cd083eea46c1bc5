"""Integer-array helpers every layer may use (numpy only): grouping millions of keys without numpy's
slower paths."""

from __future__ import annotations

import numpy as np


def unique_inverse(a: np.ndarray, below: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, return_inverse=True) of an integer array (flattened), by one stable argsort: 1.5 to 3 times
    faster on a run's millions of keys, which numpy's sorts through an index with quicksort. With ``below``
    (a range about the size of ``a``, such as op or row indices): when every value is in 0..below-1, by
    marking the values seen in a table of that size, without sorting."""
    a = np.asarray(a).reshape(-1)
    if below is not None and (not a.size or (int(a.min()) >= 0 and int(a.max()) < below)):
        seen = np.zeros(below, bool)
        seen[a] = True
        values = np.flatnonzero(seen)
        del seen
        rank = np.empty(below, np.intp)
        rank[values] = np.arange(values.size)
        return values.astype(a.dtype, copy=False), rank[a]
    order = np.argsort(a, kind="stable")
    s = a[order]
    values, counts = run_lengths(s)
    inverse = np.empty(s.size, np.intp)
    inverse[order] = np.repeat(np.arange(values.size), counts)
    return values, inverse


def run_starts(a: np.ndarray) -> np.ndarray:
    """intp: the index of the first element of every run of equal values of ``a`` (of a sorted array: of
    every distinct value)."""
    new = np.empty(a.size, bool)
    new[:1] = True
    np.not_equal(a[1:], a[:-1], out=new[1:])
    return np.flatnonzero(new)


def run_lengths(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, counts) of the runs of equal values of ``a``: np.unique(a, return_counts=True) when ``a`` is
    sorted, without sorting it again."""
    starts = run_starts(a)
    return a[starts], np.diff(np.append(starts, a.size))
