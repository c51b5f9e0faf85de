"""Public names that load their module on first use (a package's ``__getattr__``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, module_of: Mapping[str, str],
               namespace: MutableMapping[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: name -> its module (relative to ``package``) in
    ``module_of``, imported when the name is first asked for and kept in ``namespace``, so
    that importing the package (or one of its modules) does not import all of them."""

    def __getattr__(name: str) -> Any:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module_of[name], package), name)
        namespace[name] = value
        return value

    return __getattr__
