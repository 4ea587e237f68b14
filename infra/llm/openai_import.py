"""Import `openai` without running its type packages' re-export lists until something reads them.

`import openai` runs `openai/types/__init__.py`, which re-exports the model of every API the
package covers (responses, evals, graders, realtime, beta agents …), and `openai._client` imports
one small module of `openai.types.responses`, whose `__init__` re-exports hundreds more: about
600 modules and 750 pydantic models, ≈ 230 ms of CPU in the worker's Lambda init, none of them
used by a chat completion or an embedding.

`openai.lib` is the same: the client's authentication hooks live in `openai.lib._client_auth`,
and importing it ran `openai/lib/__init__.py`, which re-exports the structured-output helpers
(`openai.lib._parsing`, with the chat types it reads: ≈ 46 modules, ≈ 25 ms) that only
`client.chat.completions.parse` uses.

Every `__init__.py` under `openai.types`, and `openai.lib`'s, only re-exports names of its own
submodules (`from .chat_completion import ChatCompletion as ChatCompletion`; tests/infra/
test_openai_import.py checks it on the installed version). So `import_openai()` imports those
packages with their `__init__` deferred (`infra.deferred_init`): a name a package re-exports is
read from the one submodule that defines it, anything else runs the deferred `__init__` once.
Nothing `openai` does changes: its classes, its requests and its answers are the same objects,
imported later or not at all.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType

from infra.deferred_init import DeferredInitFinder, DeferredInitLoader

TYPES_PACKAGE = "openai.types"
LIB_PACKAGE = "openai.lib"  # the package alone, not its subpackages


def _is_deferred_package(fullname: str) -> bool:
    return fullname in (TYPES_PACKAGE, LIB_PACKAGE) or fullname.startswith(TYPES_PACKAGE + ".")


class DeferredTypesFinder(DeferredInitFinder):
    """Finds the packages under `openai.types`, and `openai.lib`, as usual, with
    `DeferredInitLoader` loading them."""

    def __init__(self) -> None:
        super().__init__(_is_deferred_package)


_FINDER = DeferredTypesFinder()


def import_openai() -> ModuleType:
    """`openai`, imported with the `__init__` of its type packages deferred (the first import in
    the process; once `openai` is imported, it is returned as it is)."""
    if "openai" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return import_module("openai")


__all__ = [
    "LIB_PACKAGE",
    "TYPES_PACKAGE",
    "DeferredInitLoader",
    "DeferredTypesFinder",
    "import_openai",
]
