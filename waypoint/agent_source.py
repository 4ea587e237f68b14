"""Where the CLI's agent comes from: a YAML/JSON document, or Python that builds one.

    waypoint chat agent.yaml --tools my_tools     a document; tools from the module's registry
    waypoint chat my_agent.py                     a Python file (beside you or anywhere)
    waypoint chat my_agents:support               a module in the working directory, attribute

A Python agent is the module's `agent` (or the named attribute): an `AgentSnapshot`, a builder
(`engine.authoring.Agent`, built here), or a function without arguments returning either. Without
`agent`, a `build()` function is called. When the module itself exposes the tool registry
(`registry` or `TOOLS`, like a tools module), it is the tools module unless `--tools` says
otherwise: one file can hold the agent and its tools.

Local modules import from the working directory and from the agent file's directory. Every failure
is a `CliProblem`: one line saying what to fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from engine.errors import InvalidAgentDefinition
from engine.model import AgentSnapshot
from engine.tools.spec import ToolSpec

DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json")
PYTHON_ATTRIBUTES = ("agent", "build")


class CliProblem(Exception):
    """A failure the user can fix, told in one line (exit code `code`)."""

    def __init__(self, message: str, *, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class AgentProblems(CliProblem):
    """The agent definition has problems; `problems` lists each, naming what to fix."""

    def __init__(self, where: str, problems: list[str]) -> None:
        super().__init__(f"{where}: {len(problems)} problem(s)", code=1)
        self.problems = problems


@dataclass
class AgentSource:
    """The `AGENT` argument and `--tools` option of a command, loadable again (`/reload`)."""

    spec: str | None  # None: the banking concierge
    tools: str | None = None

    @property
    def is_python(self) -> bool:
        return self.spec is not None and (self.spec.endswith(".py") or _is_module_ref(self.spec))

    def describe(self) -> str:
        return self.spec or "the banking concierge"

    def load(self, *, fresh: bool = False) -> tuple[AgentSnapshot, str | None]:
        """The agent and the tools module its turns call. `fresh`: import the local modules
        again (the agent's and the tools'), for an edited file."""
        _local_imports(self.spec)
        if self.spec is None:
            from examples.banking import TOOLS_MODULE
            from examples.banking import load as load_bank

            return load_bank(), self.tools or TOOLS_MODULE
        if self.is_python:
            return self._load_python(fresh)
        return self._load_document(fresh)

    # ---- a document

    def _load_document(self, fresh: bool) -> tuple[AgentSnapshot, str | None]:
        from engine.authoring import load_agent

        assert self.spec is not None
        path = Path(self.spec)
        if not path.exists():
            raise CliProblem(f"{path} does not exist: give the path of an agent file")
        if path.suffix.lower() not in DOCUMENT_SUFFIXES:
            raise CliProblem(
                f"{path}: an agent is a .yaml/.yml/.json document, a .py file or module:attribute"
            )
        specs = tool_specs(self.tools, fresh=fresh)
        try:
            return load_agent(path, tools=specs), self.tools
        except InvalidAgentDefinition as exc:
            raise AgentProblems(str(path), exc.problems) from None

    # ---- Python

    def _load_python(self, fresh: bool) -> tuple[AgentSnapshot, str | None]:
        assert self.spec is not None
        module, attribute = self._python_module(fresh)
        snapshot = _snapshot_from(module, attribute, self.spec)
        tools = self.tools
        if tools is None and _exposes_registry(module):
            tools = module.__name__
        elif tools is not None:
            tool_specs(tools, fresh=fresh)  # fails here, in one line, rather than in a turn
        if tools is None and snapshot.tools:
            names = ", ".join(t.name for t in snapshot.tools)
            raise CliProblem(
                f"{self.spec}: the agent calls tools ({names}) but nothing runs them: expose "
                "`TOOLS = [...]` (or `registry`) in the module, or pass --tools MODULE"
            )
        return snapshot, tools

    def _python_module(self, fresh: bool) -> tuple[ModuleType, str | None]:
        assert self.spec is not None
        if self.spec.endswith(".py"):
            path = Path(self.spec)
            if not path.exists():
                raise CliProblem(f"{path} does not exist: give the path of a Python agent file")
            name = path.stem
            if not name.isidentifier():
                raise CliProblem(f"{path}: rename it to a valid module name (letters, _, digits)")
            known = sys.modules.get(name)
            if known is not None and _file_of(known) != path.resolve():
                raise CliProblem(
                    f"{path}: a module named {name!r} is already imported from elsewhere "
                    f"({_file_of(known) or 'built in'}); rename the file"
                )
            return _import(name, self.spec, fresh), None
        module_name, _, attribute = self.spec.partition(":")
        return _import(module_name, self.spec, fresh), attribute or None


def tool_specs(tools: str | None, *, fresh: bool = False) -> list[ToolSpec] | None:
    """The @tool registry's specs of the module `tools`; a `CliProblem` naming the cause (the
    module's own error and where it happened) when it cannot be used."""
    if tools is None:
        return None
    from engine.toolkit import ToolRegistryNotConfigured, registry_from_module

    _local_imports(None)
    _import(tools, f"--tools={tools}", fresh)  # its own failure, told with where it happened
    try:
        return registry_from_module(tools, setting="--tools").specs
    except ToolRegistryNotConfigured as exc:
        raise CliProblem(f"{exc}: add one to the module") from None


def _import(name: str, what: str, fresh: bool) -> ModuleType:
    try:
        module = sys.modules.get(name)
        if module is not None and fresh:
            return importlib.reload(module)
        return module or importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise CliProblem(
                f"{what}: no module named {exc.name!r} in {os.getcwd()} or on PYTHONPATH; run "
                "from the directory that holds it, or give the path of the .py file"
            ) from None
        raise CliProblem(f"{what} failed while importing: {failure_summary(exc)}") from exc
    except Exception as exc:
        raise CliProblem(f"{what} failed while importing: {failure_summary(exc)}") from exc


def _snapshot_from(module: ModuleType, attribute: str | None, spec: str) -> AgentSnapshot:
    from engine.authoring import Agent

    names = (attribute,) if attribute else PYTHON_ATTRIBUTES
    found = next((n for n in names if hasattr(module, n)), None)
    if found is None:
        wanted = f"`{attribute}`" if attribute else "`agent` (or a `build()` function)"
        raise CliProblem(f"{spec}: the module defines no {wanted}; define it, or name one (m:attr)")
    value: Any = getattr(module, found)
    try:
        if callable(value) and not isinstance(value, Agent | AgentSnapshot):
            value = value()
        if isinstance(value, Agent):
            value = value.build()
    except InvalidAgentDefinition as exc:
        raise AgentProblems(spec, exc.problems) from None
    except Exception as exc:
        raise CliProblem(f"{spec}: building the agent failed: {failure_summary(exc)}") from exc
    if not isinstance(value, AgentSnapshot):
        raise CliProblem(
            f"{spec}: `{found}` is a {type(value).__name__}; it must be an Agent (builder), an "
            "AgentSnapshot, or a function returning one"
        )
    return value


def _exposes_registry(module: ModuleType) -> bool:
    from engine.toolkit import ToolRegistry

    return isinstance(getattr(module, "registry", None), ToolRegistry) or isinstance(
        getattr(module, "TOOLS", None), list | tuple
    )


def _is_module_ref(spec: str) -> bool:
    module, colon, attribute = spec.partition(":")
    parts = module.split(".")
    return (
        bool(colon)
        and all(p.isidentifier() for p in parts)
        and (not attribute or attribute.isidentifier())
    )


def _local_imports(spec: str | None) -> None:
    """Modules beside the user import: the working directory, and the agent file's folder."""
    folders = [os.getcwd()]
    if spec is not None and not _is_module_ref(spec):
        folders.append(str(Path(spec).resolve().parent))
    for folder in reversed(folders):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def _file_of(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def failure_summary(exc: BaseException) -> str:
    """`Type: message (file:line)` of the innermost frame outside the import machinery."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
    place = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{place}"
