"""Workload model: model, parallelism and hardware specs → per-rank trace of one training iteration.

Modules (one job each): ``model`` (ModelSpec, presets, parameter count), ``hardware`` (HardwareSpec, GPU
presets: datasheet numbers and fitted coefficients), ``compute`` (kernel time model), ``kernels`` (the
kernels of each compute op), ``calibrate``, ``coefficients``, ``lsq`` and ``shipped_coefficients`` (fitting
the model to kernel profiles, its TOML files), ``parallelism`` (ParallelismSpec and its rules), ``layout``
(rank placement, groups), ``schedule`` (1F1B / interleaved order), ``flops`` and ``sizes`` (FLOP and
message-size formulas), ``builder`` (build_trace), ``trace`` (Trace and the HDF5 schema), ``validate``,
``timeline``, ``summary``, ``chakra`` (MLCommons Chakra ET export/import), ``examples`` (shipped traces).

Attributes listed in ``__all__`` are imported lazily, so ``import cosim.cli.trace`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ModelSpec": "model", "get_model": "model", "total_params": "model",
    "HardwareSpec": "hardware", "get_hardware": "hardware",
    "ParallelismSpec": "parallelism", "check_compatible": "parallelism",
    "build_trace": "builder",
    "Trace": "trace", "OpKind": "trace", "CollKind": "trace", "AlgoHint": "trace", "Phase": "trace",
    "GroupKind": "trace", "read_trace": "trace", "write_trace": "trace",
    "check_trace": "validate", "compute_only_timeline": "timeline",
    "summarize": "summary", "format_summary": "summary",
    "write_chakra": "chakra", "read_chakra": "chakra",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"cosim.workload.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cosim.workload' has no attribute {name!r}")
