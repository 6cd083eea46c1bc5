"""cosim: packet-level ns-3 co-simulation of LLM training traffic on RoCE and InfiniBand fabrics.

Every run starts from one :class:`cosim.runs.experiment.Experiment` (a TOML file, a shipped name, CLI flags,
a sweep point or Python) and data flows one way through the packages::

    runs.experiment ── Experiment: network + workload + telemetry + limits + seed (checked by cosim.values)
        │ workload (training)            │ workload (flows)          │ network
        ▼                                ▼                           ▼
    workload ── Trace (per-rank ops)   workload.flows ── FlowSet   network ── Fabric (topology), transport
        ▼                                │                           │        attributes, ideal FCT
    collectives ── FlowDag (arrays)      │                           │
        └────────────────┬───────────────┘───────────────────────────┘
                         ▼
    engine ── the only module touching cppyy: arrays into libcosim-ns3 (ns3_scenarios/), arrays out
                         ▼
    faults ── Fault specs, one module per kind, FaultPlan: scheduled on the engine, the faults table
                         ▼
    run ── run(experiment) = record(compile(experiment) → plan, execute(plan)) → results.RunRecord
                         ▼
    results ── schema, atomic store, metric registry ──► analysis (compare, plots, report, notebooks)
                                                     ──► sweep (TOML grids of Experiments, shards, merge)
    cli ── the `cosim` command: parses and does I/O only; nothing in the library imports it

Kept import-light on purpose (no numpy, h5py or cppyy here) so that ``cosim --help`` answers at once.
"""

__version__ = "0.1.0"
