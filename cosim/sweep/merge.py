"""Gather the point files of a sweep directory into one results file (readable by read_results / compare).

The sweep manifests (``<sweep>.sweep.json``, written by ``cosim sweep``) list every point's file and run
name, so stale files of an edited sweep are ignored and missing points are reported. Runs keep their
point run names and come in point order, so merging the outputs of N shards gives the same file as a
single-process sweep (up to wall-time and provenance fields). A directory without a manifest merges every
``*.h5`` file in name order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cosim.errors import CosimInputError
from cosim.results import RunRecord, read_results, write_results
from cosim.spec.stored import check_stored
from cosim.sweep.spec import MANIFEST_SCHEMA, MANIFEST_SUFFIX


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    """What a merge wrote: the output path, run names in order, and the point files that were missing."""

    path: Path
    runs: tuple[str, ...]
    missing: tuple[str, ...]


def manifests(outdir: Path, sweep: str | None = None) -> list[Path]:
    """The sweep manifests in ``outdir`` (only ``<sweep>.sweep.json`` if named), sorted by name."""
    found = sorted(outdir.glob(f"*{MANIFEST_SUFFIX}"))
    if sweep is not None:
        found = [m for m in found if m.name == sweep + MANIFEST_SUFFIX]
        if not found:
            raise CosimInputError("--sweep", f"no manifest {sweep + MANIFEST_SUFFIX} in {outdir}")
    return found


def point_files(outdir: Path, sweep: str | None = None,
                exclude: Path | None = None) -> list[tuple[Path, str | None]]:
    """(file, expected run name or None) of every point, in sweep then point order."""
    found = manifests(outdir, sweep)
    if not found:
        skip = exclude.resolve() if exclude else None
        return [(p, None) for p in sorted(outdir.glob("*.h5")) if p.resolve() != skip]
    out = []
    for m in found:
        try:
            data = json.loads(m.read_text(encoding="utf-8"))
            if data.get("schema") != MANIFEST_SCHEMA:
                raise ValueError("schema")
            out += [(outdir / p["file"], p["run"]) for p in sorted(data["points"], key=lambda p: p["index"])]
        except (ValueError, KeyError, TypeError):
            raise CosimInputError(str(m), "not a readable sweep manifest",
                                  "rerun 'cosim sweep' to rewrite it") from None
    return out


def merge(outdir: str | Path, output: str | Path, *, summary_only: bool = False, partial: bool = False,
          sweep: str | None = None) -> MergeOutcome:
    """Merge the sweep in ``outdir`` into ``output`` atomically; missing points, and points a SIGTERM interrupted
    (a rerun of the sweep redoes them), are an error unless ``partial``."""

    outdir, output = Path(outdir), Path(output)
    if not outdir.is_dir():
        raise CosimInputError(str(outdir), "no such directory", "pass the -o directory of 'cosim sweep'")
    files = point_files(outdir, sweep, exclude=output)
    if not files:
        raise CosimInputError(str(outdir), "no sweep manifest and no .h5 files", "run 'cosim sweep' into it first")
    missing = tuple(str(f) for f, _ in files if not f.is_file())
    if missing and not partial:
        raise CosimInputError(str(outdir), f"{len(missing)} of {len(files)} points have no results yet "
                              f"(first: {Path(missing[0]).name})", "run the missing shards, or pass --partial")
    records: list = []
    seen: dict[str, Path] = {}
    for f, run in files:
        if not f.is_file():
            continue
        runs = read_results(f)
        check_stored(runs, str(f))
        if run is not None:
            if run not in runs:
                raise CosimInputError(str(f), f"has no run {run!r}", "delete it and rerun its sweep point")
            runs = {run: runs[run]}
        for name, r in runs.items():
            if r.summary.get("status") == "interrupted" and run is not None and not partial:
                raise CosimInputError(str(f), f"point run {name!r} was interrupted (SIGTERM) before it finished",
                                      "rerun the sweep to redo it, or pass --partial")
            if name in seen:
                raise CosimInputError(str(f), f"run {name!r} is also in {seen[name].name}",
                                      "merge one sweep at a time with --sweep NAME")
            seen[name] = f
            records.append(RunRecord(name=name, config=r.config, provenance=r.provenance, summary=r.summary)
                           if summary_only else r)
    if not records:
        raise CosimInputError(str(outdir), "none of the points has results yet", "run the sweep first")
    write_results(output, records)
    return MergeOutcome(path=output, runs=tuple(seen), missing=missing)
