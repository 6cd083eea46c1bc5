"""cosim: packet-level ns-3 co-simulation of LLM training traffic on RoCE and InfiniBand fabrics.

Every run starts from one :class:`cosim.spec.Experiment` (a TOML file, a shipped name, CLI flags,
a sweep point or Python) and data flows one way through the packages::

    spec ── Experiment: network + workload(s) + telemetry + limits + faults + seed, from TOML documents,
        │   shorthands and overrides (values checked by cosim.values); spec.catalog: the shipped ones
        ▼
    kinds ── one class per workload kind (training, inference, flows, background): what it loads, how it
        │    lowers onto its hosts, its ideal time, tables and summary
        │      built from workload (Trace), collectives (FlowDag), network (Fabric, transport attributes)
        ▼
    plan ── compile(experiment): fabric, placement, ONE DAG in host ids, attributes, time limit, faults
        │   (cosim.faults: one module per fault kind); plan.describe: the dry run and the estimates
        ▼
    engine ── arrays into libcosim-ns3 (ns3_scenarios/), arrays out; cosim.plugin loads it with cppyy (the
        │     only module importing cppyy; lowering calls its array helpers through it too)
        │     (decompose: independent or identical parts simulated apart and merged exactly)
        ▼
    run ── run(experiment) = record(plan, execute(plan)); record + telemetry: the results.RunRecord
        │   (cosim.losses: the causes of the losses table, shared by engine, results and analysis)
        ▼
    results ── schema, atomic store, metric registry ──► analysis (compare, plots, report, notebooks)
                                                     ──► sweep (TOML grids of Experiments, shards, merge)
    cli ── the `cosim` command: parses and does I/O only; nothing in the library imports it

Kept import-light on purpose (no numpy, h5py or cppyy here) so that ``cosim --help`` answers at once.
"""

__version__ = "0.1.0"
