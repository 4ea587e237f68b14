"""Import `openai` without running its type packages' re-export lists until something reads them.

`import openai` runs `openai/types/__init__.py`, which re-exports the model of every API the
package covers (responses, evals, graders, realtime, beta agents …), and `openai._client` imports
one small module of `openai.types.responses`, whose `__init__` re-exports hundreds more: about
600 modules and 750 pydantic models, ≈ 230 ms of CPU in the worker's Lambda init, none of them
used by a chat completion or an embedding.

Every `__init__.py` under `openai.types` only re-exports names of its own submodules
(`from .chat_completion import ChatCompletion as ChatCompletion`; tests/infra/
test_openai_import.py checks it on the installed version). So `import_openai()` imports those
packages with their `__init__` deferred: the package module exists, with its `__path__`, and its
submodules import as usual. A name the package re-exports is read from the one submodule its
`__init__` takes it from (`from openai.types.chat import ChatCompletion` imports
`openai.types.chat.chat_completion`, not the 60 other modules of `openai.types.chat`); a
submodule read as an attribute is imported alone; anything else (`__all__`, `from … import *`, a
name no line re-exports) runs the deferred `__init__`, once, and reads the result. Nothing
`openai` does changes: its classes, its requests and its answers are the same objects, imported
later or not at all.
"""

from __future__ import annotations

import ast
import sys
import threading
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

TYPES_PACKAGE = "openai.types"


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
                    reexports.update(_reexports(real, name))
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


def _reexports(loader: Loader, package: str) -> dict[str, tuple[str, str]]:
    """What a package's `__init__` re-exports: name → (its submodule, the name there), from the
    `from .submodule import Name as Name` lines of its source (the last binding of a name wins,
    as when the lines run)."""
    get_source = getattr(loader, "get_source", None)
    source = get_source(package) if get_source is not None else None
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source or "").body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


class DeferredTypesFinder(MetaPathFinder):
    """Finds the packages under `openai.types` as usual, with `DeferredInitLoader` loading them."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != TYPES_PACKAGE and not fullname.startswith(TYPES_PACKAGE + "."):
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a plain module: imported as it is
        spec.loader = DeferredInitLoader(spec.loader)
        return spec


_FINDER = DeferredTypesFinder()


def import_openai() -> ModuleType:
    """`openai`, imported with the `__init__` of its type packages deferred (the first import in
    the process; once `openai` is imported, it is returned as it is)."""
    if "openai" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return import_module("openai")


__all__ = ["TYPES_PACKAGE", "DeferredInitLoader", "DeferredTypesFinder", "import_openai"]
