"""One module per fault kind, each a FaultKind subclass registered with cosim.faults.registry.register.

Importing this package imports every module in it, so a new kind is one new file here (and its rows in
docs/models/faults.md)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
