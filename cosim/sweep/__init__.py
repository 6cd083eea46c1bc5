"""Parameter sweeps: a TOML grid of scenarios → one results file per point, shardable over Slurm arrays.

- ``cosim.sweep.spec``: load and expand a sweep TOML into validated points (no simulation)
- ``cosim.sweep.runner``: run the points of one shard, skipping finished ones, in 1..N processes
- ``cosim.sweep.merge``: gather the point files of a sweep directory into one results file

Kept import-light: nothing heavy is imported here.
"""
