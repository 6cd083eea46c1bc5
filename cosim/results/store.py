"""Results files on disk: an atomic writer and a validating reader (the schema is in cosim.results.schema)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path

import numpy as np
import h5py

from cosim import __version__
from cosim.errors import CosimInputError
from cosim.h5io import atomic_output
from cosim.results.schema import DATASETS, GROUPS, SCHEMA, SCHEMA_VERSION, RunRecord


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith("."):
        raise CosimInputError("run name", f"{name!r} is not a valid run name", "use letters, digits, - and _")


def _write_run(h5, run: RunRecord) -> None:
    _check_name(run.name)
    # Creation order is kept, so runs read back in the order they were written (roce before ib).
    runs = h5["runs"] if "runs" in h5 else h5.create_group("runs", track_order=True)
    if run.name in runs:
        del runs[run.name]
    g = runs.create_group(run.name)
    g.attrs["config"] = json.dumps(run.config, sort_keys=True)
    g.attrs["provenance"] = json.dumps(run.provenance, sort_keys=True)
    g.attrs["summary"] = json.dumps(run.summary, sort_keys=True)
    for group in GROUPS:
        if not run.table(group):
            continue
        sub = g.create_group(group)
        for name, values in run.table(group).items():
            values = np.asarray(values)
            big = values.size > 4096
            ds = sub.create_dataset(name, data=values, chunks=True if big else None,
                                    compression="gzip" if big else None, shuffle=big)
            units, description = DATASETS.get((group, name), ("", ""))
            ds.attrs["units"] = units
            ds.attrs["description"] = description


def _write_root(h5) -> None:
    h5.attrs["schema"] = SCHEMA
    h5.attrs["schema_version"] = SCHEMA_VERSION
    h5.attrs["cosim_version"] = __version__
    h5.attrs["created_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def check_writable(path: str | Path, *, append: bool = False) -> None:
    """Fail before a run, not after it, when ``path`` cannot be written: its folder is missing or read-only,
    it is a folder, or (with ``append``) it exists but is not a cosim results file."""
    p = Path(path)
    if not str(path):
        raise CosimInputError("--output", "is empty", "name a results file, e.g. -o results.h5")
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CosimInputError("--output", f"{p} is a folder", "name a file inside it")
    if not folder.is_dir():
        raise CosimInputError("--output", f"folder {folder} does not exist", "create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CosimInputError("--output", f"folder {folder} is not writable", "choose another output path")
    if append and p.exists():
        read_results(p)


def write_results(path: str | Path, runs: list[RunRecord], *, append: bool = False) -> Path:
    """Write ``runs`` to ``path`` atomically; with ``append`` keep the runs already in an existing file."""
    path = Path(path)
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise CosimInputError("run name", f"duplicate run names in {names}")
    keep_existing = append and path.exists()
    if keep_existing:
        read_results(path)  # validates the existing file before we touch it
    with atomic_output(path) as tmp:
        if keep_existing:
            shutil.copyfile(path, tmp)
        with h5py.File(tmp, "a" if keep_existing else "w") as h5:
            if not keep_existing:
                _write_root(h5)
            for run in runs:
                _write_run(h5, run)
    return path


def _corrupt(path: Path, problem: str) -> CosimInputError:
    return CosimInputError(str(path), problem, "pass a results file written by 'cosim run'")


def read_results(path: str | Path) -> dict[str, RunRecord]:
    """Read every run of a results file, validating its schema; raise CosimInputError if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise CosimInputError(str(path), "no such file")
    try:
        h5 = h5py.File(path, "r")
    except OSError:
        raise _corrupt(path, "not a readable HDF5 file (corrupt or truncated?)") from None
    with h5:
        if h5.attrs.get("schema") != SCHEMA:
            raise _corrupt(path, f"not a cosim results file (schema attribute {h5.attrs.get('schema')!r})")
        version = int(h5.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise _corrupt(path, f"schema version {version}, this cosim reads version {SCHEMA_VERSION}")
        runs: dict[str, RunRecord] = {}
        try:
            for name, g in h5.get("runs", {}).items():
                tables = {grp: {k: v[()] for k, v in g[grp].items()} if grp in g else {} for grp in GROUPS}
                runs[name] = RunRecord(
                    name=name,
                    config=json.loads(g.attrs["config"]),
                    provenance=json.loads(g.attrs["provenance"]),
                    summary=json.loads(g.attrs["summary"]),
                    **tables,
                )
        except (KeyError, ValueError, OSError, TypeError) as exc:
            raise _corrupt(path, f"damaged run data ({type(exc).__name__}: {exc})") from None
    return runs
