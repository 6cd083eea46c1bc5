"""Runs: the Experiment spec, the shipped experiments, and the building blocks the plan and the kinds use.

- :mod:`cosim.runs.experiment` — Experiment and its sections; documents, overrides, TOML;
- :mod:`cosim.runs.catalog` — the named experiments shipped with cosim;
- :mod:`cosim.runs.training`, :mod:`cosim.runs.inference`, :mod:`cosim.runs.background` — pure functions of
  the training, inference and background kinds (cosim.kinds);
- :mod:`cosim.runs.placement` (where each job runs), :mod:`cosim.runs.time_limit`, the fault modules, and
  decomposition (:mod:`cosim.runs.decompose_run`, :mod:`cosim.runs.decompose_batch`).

A run itself is ``cosim.run.run(experiment)``: compile (cosim.plan), execute, record (cosim.record).
"""
