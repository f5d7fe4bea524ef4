"""A package's names loaded on first use (PEP 562), for `spotfit.spec` and `spotfit.state`.

`__getattr__ = lazy_names(__name__, MAIN)` in a package's `__init__`: `package.sub` imports the
sub-module `sub`, any other name comes from the module `MAIN`. Importing one light sub-module
(`spotfit.state.states`) then loads nothing else, and `from spotfit.state import StateDB` works
as it did when the package was one module.

>>> getattr_ = lazy_names("spotfit.state", "spotfit.state.db")
>>> getattr_("states").__name__, getattr_("StateDB").__name__
('spotfit.state.states', 'StateDB')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, main: str) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: its sub-modules by name, else the names of `main`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
            return getattr(importlib.import_module(main), name)

    return __getattr__
