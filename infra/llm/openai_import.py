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
submodules import as usual (`from openai.types.chat.chat_completion import ChatCompletion` loads
that one module); the first read of a name the package itself defines (`openai.types.ChatModel`,
`from openai.types import *`) runs the deferred `__init__` then, once, and reads it from the
result. A submodule read as an attribute (`openai.types.chat`) is imported alone. Nothing `openai`
does changes: its classes, its requests and its answers are the same objects, imported later or
not at all.
"""

from __future__ import annotations

import sys
import threading
from importlib import import_module
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

TYPES_PACKAGE = "openai.types"


class DeferredInitLoader(Loader):
    """Loads a package without running its `__init__` until a name it defines is read."""

    def __init__(self, real: Loader) -> None:
        self.real = real

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        lock = threading.RLock()
        real = self.real

        def __getattr__(attr: str) -> Any:
            if attr.startswith("__") and attr != "__all__":
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            if attr != "__all__" and PathFinder.find_spec(f"{name}.{attr}", module.__path__):
                return import_module(f"{name}.{attr}")  # a submodule: only that one
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                    real.exec_module(module)  # the deferred `__init__`, once
            if attr in module.__dict__:
                return module.__dict__[attr]
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


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
