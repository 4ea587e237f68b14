"""Import a package without running its `__init__` until something reads what only it defines.

Some packages' `__init__` does nothing but re-export the names of their own submodules
(`from .chat_completion import ChatCompletion as ChatCompletion`), and importing one submodule
runs it first: `openai.types` and its packages (infra.llm.openai_import), or Powertools'
`utilities.data_classes`, whose `__init__` imports the classes of every event source Lambda has
when the batch utility needs three of them. A package deferred here is imported with its
`__init__` deferred: the package module exists, with its `__path__`, and its submodules import
as usual. A name the package re-exports is read from the one submodule its `__init__` takes it
from (`from openai.types.chat import ChatCompletion` imports `openai.types.chat.chat_completion`,
not the 60 other modules of `openai.types.chat`); a submodule read as an attribute is imported
alone; anything else (`__all__`, `from … import *`, a name no line re-exports) runs the deferred
`__init__`, once, and reads the result. Nothing the package does changes: its classes are the
same objects, imported later or not at all.

That premise — the `__init__` only re-exports its own submodules — is checked by each user's
tests on the installed version (tests/infra/test_openai_import.py, tests/infra/test_deferred_init.py).
"""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Callable
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any


class DeferredInitLoader(Loader):
    """Loads a package without running its `__init__`; its names are read as described above."""

    def __init__(self, real: Loader) -> None:
        self.real = real

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        lock = threading.RLock()
        real = self.real
        reexports: dict[str, tuple[str, str]] = {}  # name → (submodule, its name there)
        parsed: list[bool] = []

        def run_init() -> None:
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                    real.exec_module(module)  # the deferred `__init__`, once

        def __getattr__(attr: str) -> Any:
            if attr.startswith("__") and attr != "__all__":
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            with lock:
                if not parsed:
                    reexports.update(reexported_names(real, name))
                    parsed.append(True)
            source = reexports.get(attr)
            deferred = module.__dict__.get("__getattr__") is __getattr__
            if source is not None and deferred:
                value = getattr(import_module(f"{name}.{source[0]}"), source[1])
                setattr(module, attr, value)
                return value
            if attr != "__all__" and PathFinder.find_spec(f"{name}.{attr}", module.__path__):
                return import_module(f"{name}.{attr}")  # a submodule: only that one
            run_init()
            if attr in module.__dict__:
                return module.__dict__[attr]
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


def reexported_names(loader: Loader, package: str) -> dict[str, tuple[str, str]]:
    """What a package's `__init__` re-exports: name → (its submodule, the name there), from the
    `from .submodule import Name [as Name]` lines of its source (the last binding of a name
    wins, as when the lines run)."""
    get_source = getattr(loader, "get_source", None)
    source = get_source(package) if get_source is not None else None
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source or "").body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


class DeferredInitFinder(MetaPathFinder):
    """Finds the packages `defers(name)` accepts as usual, with `DeferredInitLoader` loading
    them; plain modules (and everything else) are left to the other finders."""

    def __init__(self, defers: Callable[[str], bool]) -> None:
        self.defers = defers

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not self.defers(fullname):
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a plain module: imported as it is
        spec.loader = DeferredInitLoader(spec.loader)
        return spec


# The package of Powertools' event source classes (`SQSRecord` …), deferred by the turn worker.
POWERTOOLS_EVENT_CLASSES = "aws_lambda_powertools.utilities.data_classes"

_installed: dict[str, DeferredInitFinder] = {}
_install_lock = threading.Lock()


def defer_init(package: str) -> bool:
    """Import `package` (exactly that one, not its subpackages) with its `__init__` deferred
    from now on. Returns False when it is already imported: then it stays as it is."""
    with _install_lock:
        if package not in _installed:
            finder = DeferredInitFinder(package.__eq__)
            _installed[package] = finder
            sys.meta_path.insert(0, finder)
    return package not in sys.modules


__all__ = [
    "POWERTOOLS_EVENT_CLASSES",
    "DeferredInitFinder",
    "DeferredInitLoader",
    "defer_init",
    "reexported_names",
]
