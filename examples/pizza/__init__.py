"""The pizza shop: `agent.yaml` (behavior) + `tools.py` (implementations) + `shop.py` (the shop)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.model import AgentSnapshot

AGENT_PATH = Path(__file__).with_name("agent.yaml")
TOOLS_MODULE = "examples.pizza.tools"


def load() -> AgentSnapshot:
    """The validated pizza shop snapshot; its tools are declared by their @tool functions."""
    from engine.authoring import load_agent  # not when a Lambda imports the tools module
    from engine.toolkit import registry_from_module

    global _loaded  # immutable: read once per process until agent.yaml changes (as banking's)
    stat = AGENT_PATH.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    if _loaded is None or _loaded[0] != key:
        _loaded = (key, load_agent(AGENT_PATH, tools=registry_from_module(TOOLS_MODULE).specs))
    return _loaded[1]


_loaded: tuple[tuple[int, int], AgentSnapshot] | None = None
