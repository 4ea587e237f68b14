"""`import_openai` defers the re-export lists of `openai.types`' packages and of `openai.lib`
(`infra.llm.openai_import`):
the premise checked on the installed `openai`, the same names and objects read either way, and
the real client calling the fake server through the deferred import, errors included.

Each check runs in a fresh interpreter: in this one `openai` may already be imported."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import Fail, FakeOpenAIServer, Reply

pytestmark = pytest.mark.long(25)  # about that many seconds: scheduled first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


def _types_root() -> Path:
    spec = importlib.util.find_spec("openai")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "types"


def _inits() -> list[Path]:
    """Every `__init__.py` the import defers: `openai.types`' packages and `openai.lib`'s."""
    root = _types_root()
    return [*sorted(root.rglob("__init__.py")), root.parent / "lib" / "__init__.py"]


def _packages() -> list[str]:
    root = _types_root().parent
    return sorted(".".join(("openai", *init.parent.relative_to(root).parts)) for init in _inits())


def _run(code: str, timeout: float = 120, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_types_package_init_only_reexports_its_own_submodules() -> None:
    """The premise of deferring them: running one later defines nothing that reading its
    submodules does not (no code, no assignment, no import from outside the package)."""
    offenders = []
    for init in _inits():
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
            own = isinstance(node, ast.ImportFrom) and node.level == 1
            if not (docstring or future or own):
                offenders.append(f"{init}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert len(_packages()) > 10  # the layout this module defers is still there
    assert "openai.lib" in _packages()
    assert offenders == []


_NAMES = """
import importlib, json, sys
packages = json.loads(PACKAGES)
if MODE != "eager":
    from infra.llm.openai_import import import_openai
    import_openai()
else:
    import openai
eager = json.loads(sys.stdin.read() or "{}")

def described(value):
    return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', repr(value))}"

names = {}
for package in packages:
    module = importlib.import_module(package)
    if MODE == "by name":  # each name read alone, as `from package import Name` reads it
        names[package] = {name: described(getattr(module, name)) for name in eager[package]}
        continue
    getattr(module, "__all__", None)  # a star import's first read: runs a deferred __init__
    names[package] = {
        name: described(value) for name, value in vars(module).items() if not name.startswith("_")
    }
print(json.dumps(names))
"""


def test_the_deferred_packages_read_the_same_names_as_the_eager_import() -> None:
    code = _NAMES.replace("PACKAGES", repr(json.dumps(_packages())))
    eager = json.loads(_run(code.replace("MODE", "'eager'"), 300))
    for mode in ("by name", "whole"):
        deferred = json.loads(_run(code.replace("MODE", repr(mode)), 300, json.dumps(eager)))
        assert set(deferred) == set(eager)
        for package, names in eager.items():
            assert deferred[package] == names, (mode, package)
    assert "ChatCompletion" in eager["openai.types.chat"]
    assert "pydantic_function_tool" in eager["openai.lib"]


_UNREAD = """
import sys
{importer}
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
client = AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1",
                     http_client=DefaultAsyncHttpxClient())
client.chat.completions, client.embeddings
built = set(sys.modules)
from openai.types import ChatModel  # a name the package re-exports: from its one submodule
by_name = set(sys.modules)
from openai.types import *  # every name: the package's own __init__ runs
print(len([m for m in built if m.startswith("openai.")]),
      "openai.types.responses.response" in built, "openai.types.eval_create_params" in by_name,
      "openai.types.chat_model" in by_name, "openai.types.eval_create_params" in sys.modules)
"""


def test_the_client_is_built_without_reading_the_apis_it_does_not_call() -> None:
    eager = _run(_UNREAD.format(importer="import openai")).split()
    deferred = _run(
        _UNREAD.format(
            importer="from infra.llm.openai_import import import_openai; import_openai()"
        )
    ).split()
    # eager: the responses and evals models are imported with the package; deferred: not until
    # the package's own __init__ runs (a star import), a name read alone only imports its module.
    assert eager[1:] == ["True", "True", "True", "True"]
    assert deferred[1:] == ["False", "False", "True", "True"]
    assert int(deferred[0]) < int(eager[0]) // 2


_CALLS = """
import asyncio, json, sys
from pydantic import BaseModel
from engine.errors import LLMError
from infra.llm.openai_embedder import OpenAIEmbedder
from infra.llm.openai_llm import OpenAISchematicLLM

class Verdict(BaseModel):
    applies: bool

# the other APIs' models, the structured-output helpers, the resources the adapters post around
UNREAD = ("openai.types.responses.response", "openai.lib._parsing", "openai.resources.chat",
          "openai.resources.embeddings", "openai.lib.streaming")

async def main():
    llm = OpenAISchematicLLM(api_key="sk-test", base_url=sys.argv[1])
    embedder = OpenAIEmbedder(api_key="sk-test", base_url=sys.argv[1], max_retries=0,
                              dimensions=8)
    first = await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")
    vectors = await embedder.embed(["one", "two"])
    try:
        await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")
    except LLMError as exc:
        error = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"applies": first.value.applies, "shape": list(vectors.shape),
                      "error": error, "unread": [m for m in UNREAD if m in sys.modules]}))

asyncio.run(main())
"""


def test_a_completion_an_embedding_and_an_error_through_the_deferred_import() -> None:
    with FakeOpenAIServer() as server:
        server.queue_chat(Reply({"applies": True}), Fail(401, "bad key"))
        code = _CALLS.replace("sys.argv[1]", repr(server.base_url))
        out = json.loads(_run(code).splitlines()[-1])
    assert out["applies"] is True
    assert out["shape"] == [2, 8]
    assert out["error"].startswith("LLMError:") and "OPENAI_API_KEY" in out["error"]
    assert out["unread"] == []
