"""Exact decomposition: a run's independent or identical parts simulated apart and merged.

- :mod:`cosim.decompose.parts` — the connected components of the links a run's flows can use (what
  ``cosim run --dry-run`` shows);
- :mod:`cosim.decompose.exact` — the pieces that can be simulated apart exactly (independent groups, or
  one folded part of identical ones), run and merged into the output the whole run gives.

docs/decomposition.md says when a run decomposes and why the merge is exact.
"""
