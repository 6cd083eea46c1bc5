"""libcosim-ns3 through cppyy: where it is installed, and loading it once (the two ns-3 libraries it links, core
and network, the plugin, and its one header, which includes no ns-3 header).

:mod:`cosim.engine` runs simulations through it; the planning layers call the plugin's array helpers
(``PlacementOrder`` in cosim.collectives.lower) through :func:`namespace`. It imports no other cosim module,
so any layer may use it, and cppyy only on the first :func:`namespace`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

import numpy as np

PLUGIN_NAME = "libcosim-ns3.so"
ENGINE_HEADER = "cosim-engine.h"

_namespace = None  # the cppyy namespace ``cosim`` once loaded


class PluginNotFoundError(RuntimeError):
    """libcosim-ns3 (or its header) is not where an installed cosim keeps it."""


def _candidate_lib_dirs() -> list[Path]:
    env = os.environ.get("COSIM_NS3_LIBRARY")
    dirs = [Path(env).parent] if env else []
    pkg = sys.modules["cosim"]
    dirs += [Path(p) / "lib" for p in getattr(pkg, "__path__", [])]
    dirs.append(Path(sysconfig.get_paths()["platlib"]) / "cosim" / "lib")
    return dirs


def find_plugin() -> tuple[Path, Path]:
    """Return (plugin library, directory of its engine header); raise PluginNotFoundError if absent."""
    searched = []
    for lib_dir in _candidate_lib_dirs():
        lib = lib_dir / PLUGIN_NAME
        searched.append(str(lib))
        if not lib.is_file():
            continue
        for inc in (lib_dir.parent / "include" / "ns3_scenarios" / "engine",
                    lib_dir.parent.parent / "ns3_scenarios" / "engine"):
            if (inc / ENGINE_HEADER).is_file():
                return lib, inc
    raise PluginNotFoundError(
        "libcosim-ns3 is not built: looked for " + ", ".join(searched)
        + ". Install cosim with 'pip install .' (or 'pip install -e .') from the repository, "
        "which compiles ns3_scenarios/ against the ns3 wheel."
    )


def _ns3_lib_dir() -> Path:
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise PluginNotFoundError("the ns3 package is not installed (pip install ns3==3.44.post0)")
    return Path(next(iter(spec.submodule_search_locations))) / "lib64"


def standard_pch(environ: Mapping[str, str], cppyy_dir: Path, backend_etc: Path, etc_writable: bool, version: str,
                 cache_home: Path) -> Path | None:
    """Where cling's precompiled standard headers (CLING_STANDARD_PCH) go when cppyy has none it can use: the
    user's cache directory, where cppyy_backend builds them once (about a minute) and every later run reads
    them. None when the user chose a file, when cppyy installed one (``cppyy/allDict.cxx.pch.VERSION``, built
    at ``pip install``), or when cppyy_backend has one or can build one in its own ``etc``: without any,
    every run parses the standard headers instead, seconds each."""
    if "CLING_STANDARD_PCH" in environ or (cppyy_dir / f"allDict.cxx.pch.{version}").is_file():
        return None
    if etc_writable or any(backend_etc.glob("allDict.cxx.pch*")):
        return None
    return cache_home / "cosim" / "cling" / f"allDict.cxx.pch.{version}"


def _use_cached_pch() -> None:
    spec = importlib.util.find_spec("cppyy")
    if spec is None or spec.origin is None:
        return  # importing it says what is missing
    import cppyy_backend  # noqa: PLC0415 - what cppyy imports first anyway

    etc = Path(cppyy_backend.__file__).parent / "etc"
    cppyy_dir = Path(spec.origin).parent
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    pch = standard_pch(os.environ, cppyy_dir, etc, os.access(etc, os.W_OK), cppyy_backend.__version__, cache_home)
    if pch is not None:
        pch.parent.mkdir(parents=True, exist_ok=True)
        os.environ["CLING_STANDARD_PCH"] = str(pch)


def namespace():
    """cppyy's ``cosim`` namespace of the plugin, loading ns-3 core and network, the plugin and its header
    the first time."""
    global _namespace
    if _namespace is not None:
        return _namespace
    lib, include_dir = find_plugin()
    _use_cached_pch()
    import cppyy  # noqa: PLC0415 - deliberately lazy: only simulation and lowering need it

    # Cling compiles a call wrapper for each C++ function at its first call, optimized (-O2) by default: a dozen
    # before a run's first event, twenty in a run. Unoptimized they compile 2-3 times faster (bench/README.md,
    # time to the first event); they only pass arguments to the compiled plugin, so nothing else changes.
    # The level is the process's: C++ a user JITs through cppyy afterwards is unoptimized too (".O 2" restores).
    cppyy.gbl.gInterpreter.ProcessLine(".O 0")
    ns3_dir = _ns3_lib_dir()
    # Loaded by absolute path first, so the plugin's DT_NEEDED entries resolve whatever its RPATH says
    # (editable installs, relocated venvs).
    for module in ("core", "network"):
        matches = sorted(ns3_dir.glob(f"libns3.*-{module}.so"))
        if not matches:
            raise PluginNotFoundError(f"no libns3.*-{module}.so in {ns3_dir}")
        cppyy.load_library(str(matches[0]))
    cppyy.load_library(str(lib))
    cppyy.add_include_path(str(include_dir))
    cppyy.include(ENGINE_HEADER)
    _namespace = cppyy.gbl.cosim
    return _namespace


def pointer(a: np.ndarray) -> np.ndarray:
    """``a``, or a one-element array of its dtype when it is empty: cppyy passes no pointer for an empty array,
    and a C++ function that reads none of it still needs one."""
    return a if a.size else np.zeros(1, a.dtype)
