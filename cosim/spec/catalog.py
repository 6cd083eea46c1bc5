"""Named experiments shipped with cosim: the TOML files of ``ns3_scenarios/experiments/``.

An installed cosim keeps them in ``<site-packages>/cosim/experiments/``; a source checkout reads them from
the repository. ``cosim run --list`` shows them and ``cosim run NAME`` runs one.
"""

from __future__ import annotations

from pathlib import Path

import cosim
from cosim.errors import CosimInputError
from cosim.spec import read_toml

#: the experiment a bare ``cosim run`` runs
DEFAULT = "builtin"


def _directories() -> list[Path]:
    dirs = []
    for p in map(Path, cosim.__path__):
        dirs += [p / "experiments", p.parent / "ns3_scenarios" / "experiments"]
    return [d for d in dirs if d.is_dir()]


def names() -> list[str]:
    """The names of the shipped experiments, sorted."""
    return sorted({p.stem for d in _directories() for p in d.glob("*.toml")})


def path_of(name: str) -> Path:
    """The TOML file of shipped experiment ``name``."""
    for d in _directories():
        if (d / f"{name}.toml").is_file():
            return d / f"{name}.toml"
    raise CosimInputError("experiment", f"no shipped experiment named {name!r}",
                          f"choose one of {', '.join(names()) or '(none installed)'} or pass a TOML file")


def load_document(source: str | Path) -> tuple[dict, str]:
    """(document, where) of ``source``: a path to a TOML file, or the name of a shipped experiment."""
    path = Path(source)
    if path.suffix == ".toml" or path.exists() or "/" in str(source):
        return read_toml(path), str(path)
    return read_toml(path_of(str(source))), str(source)
