"""Runs: the Experiment spec, the shipped experiments, and one run function from an Experiment to a record.

- :mod:`cosim.runs.experiment` — Experiment and its sections; documents, overrides, TOML;
- :mod:`cosim.runs.catalog` — the named experiments shipped with cosim;
- :mod:`cosim.runs.run` — ``run(experiment)`` → RunRecord, ``preflight``, ``describe`` (dry run);
- :mod:`cosim.runs.flows`, :mod:`cosim.runs.training` — the two kinds of workload behind ``run``;
- :mod:`cosim.runs.multi` — several workloads on one fabric (``[[workloads]]``), with
  :mod:`cosim.runs.placement` (where each runs) and :mod:`cosim.runs.background` (storage, checkpoint and
  synthetic traffic).
"""
