"""Experiments stored in results files, checked as a document from any other source is: a run whose stored
experiment is damaged in value (a hand edit, a bit flip: ``limits.collective_timeout_ns = -1``) is refused
where it is read to be copied on (``cosim run --append``, ``cosim merge``), naming the file, run and field."""

from __future__ import annotations

from collections.abc import Mapping

from cosim.errors import CosimInputError
from cosim.spec.documents import from_document


def check_stored(runs: Mapping[str, object], where: str) -> None:
    """Raise a CosimInputError naming ``where``, the run and the field when a run of ``runs`` (name ->
    cosim.results.RunRecord) stores an experiment that is not a valid one. Runs without one (written by
    other tools) pass."""
    for name, run in runs.items():
        doc = (getattr(run, "config", None) or {}).get("experiment")
        if doc is None:
            continue
        try:
            from_document(doc, where=f"{where}: runs/{name}: stored experiment")
        except CosimInputError as exc:
            raise CosimInputError(exc.field, exc.problem, "the file is damaged: rerun that run, or leave it out "
                                  "of the merge") from None
