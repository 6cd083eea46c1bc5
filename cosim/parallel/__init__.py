"""Conservative parallel simulation of one run (docs/parallel.md).

- :mod:`cosim.parallel.partition` — which partition simulates every host, switch and DAG op; the cut links;
- :mod:`cosim.parallel.simulate` — the partitions run in windows of the shortest cut link's delay, in one
  process or on MPI ranks, and merged into one output;
- :mod:`cosim.parallel.mpi` — the MPI world (mpi4py, imported only under an MPI launcher).
"""
