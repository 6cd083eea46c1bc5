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
    new = np.empty(s.size, bool)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    inverse = np.empty(s.size, np.intp)
    inverse[order] = np.repeat(np.arange(starts.size), np.diff(np.append(starts, s.size)))
    return s[starts], inverse
