"""The compute-model coefficients file: TOML, written by ``cosim calibrate``, shipped per GPU preset.

::

    schema = "cosim.compute-coefficients"
    schema_version = 1
    gpu = "h100"                 # the datasheet preset the coefficients apply to
    [datasheet]                  # optional: datasheet fields that differ from the preset's
    hbm_bytes_per_s = 3.35e12
    [coefficients]               # HardwareSpec coefficient fields (every one; see cosim.workload.hardware)
    compute_efficiency = 0.80
    ...
    [provenance]                 # free-form record of where the numbers come from
    status = "fitted"            # or "derived, not fitted"
    source = "..."
    [provenance.error.attn_pre_proj]   # in-sample |predicted / measured - 1| per profiled operator
    median = 0.06
    max = 0.41

Floats are written with ``repr``, so a file read back gives the same coefficients bit for bit.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

from cosim.errors import CosimInputError

SCHEMA = "cosim.compute-coefficients"
SCHEMA_VERSION = 1
#: HardwareSpec datasheet fields: what a preset fixes and a file's [datasheet] table may override
DATASHEET_FIELDS = ("peak_flops_per_s", "hbm_bytes", "hbm_bytes_per_s", "nvlink_bytes_per_s", "nic_bytes_per_s",
                    "sm_count", "gpus_per_host", "nvlink_latency_ns", "nvls")
#: HardwareSpec compute-model coefficients, the [coefficients] table (the fit sets all but the attention
#: efficiencies and tile shape, which come from the base preset)
COEFFICIENT_FIELDS = ("compute_efficiency", "gemm_memory_efficiency", "gemm_small_m", "gemm_small_n",
                      "gemm_small_k", "gemm_wave_weight", "gemm_roofline_sharpness", "gemm_launch_ns",
                      "gemm_tile_m", "gemm_tile_n", "attention_efficiency", "attention_bwd_efficiency",
                      "attention_half_keys", "attention_exponent", "attention_bwd_half_keys",
                      "attention_bwd_exponent",
                      "memory_efficiency", "memory_launch_ns", "norm_memory_efficiency", "norm_launch_ns",
                      "rope_memory_efficiency", "rope_launch_ns", "activation_memory_efficiency",
                      "activation_launch_ns", "embedding_memory_efficiency", "embedding_launch_ns")


def read_coefficients(path: str | Path) -> dict:
    """Parse the coefficients file ``path`` (checked later by :func:`check_document`)."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise CosimInputError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CosimInputError(str(path), f"is not valid TOML ({exc})") from None


def check_document(doc: dict, *, where: str) -> tuple[str, dict, dict, str]:
    """(base preset, datasheet overrides, coefficients, calibration summary) of a parsed document."""
    if doc.get("schema") != SCHEMA:
        raise CosimInputError(f"{where}: schema", f"is {doc.get('schema')!r}, not {SCHEMA!r}",
                              "give a file written by cosim calibrate")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CosimInputError(f"{where}: schema_version", f"is {doc.get('schema_version')!r}, this cosim reads "
                              f"{SCHEMA_VERSION}")
    base = doc.get("gpu")
    if not isinstance(base, str):
        raise CosimInputError(f"{where}: gpu", "must name the GPU preset the coefficients apply to")
    tables = {}
    for name, allowed, required in (("datasheet", DATASHEET_FIELDS, False), ("coefficients", COEFFICIENT_FIELDS, True)):
        table = doc.get(name, {})
        if not isinstance(table, dict):
            raise CosimInputError(f"{where}: {name}", "must be a table")
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise CosimInputError(f"{where}: {name}.{unknown[0]}", "is not a field of this table",
                                  f"choose among {', '.join(allowed)}")
        missing = [f for f in allowed if f not in table] if required else []
        if missing:
            raise CosimInputError(f"{where}: {name}.{missing[0]}", "is missing")
        tables[name] = table
    provenance = doc.get("provenance", {})
    status = provenance.get("status", "unknown") if isinstance(provenance, dict) else "unknown"
    source = provenance.get("source", "") if isinstance(provenance, dict) else ""
    summary = f"{status}: {source}" if source else str(status)
    return base, tables["datasheet"], tables["coefficients"], summary


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"cannot write {v!r} to TOML")
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _table(lines: list[str], name: str, table: dict) -> None:
    subtables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    values = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    if values or not subtables:  # a table of tables only needs no header of its own
        lines.append(f"\n[{name}]")
    for k, v in values:
        lines.append(f"{k} = {_value(v)}")
    for k, v in subtables:
        _table(lines, f"{name}.{k}", v)


def format_coefficients(*, gpu: str, coefficients: dict, provenance: dict, datasheet: dict | None = None,
                        header: str = "") -> str:
    """The TOML text of a coefficients file (module docstring); ``header`` becomes leading comments."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines += [f'schema = "{SCHEMA}"', f"schema_version = {SCHEMA_VERSION}", f"gpu = {_value(gpu)}"]
    if datasheet:
        _table(lines, "datasheet", datasheet)
    _table(lines, "coefficients", coefficients)
    _table(lines, "provenance", provenance)
    return "\n".join(lines) + "\n"
