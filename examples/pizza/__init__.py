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
    from examples import loaded_once

    return loaded_once(
        AGENT_PATH,
        lambda: load_agent(AGENT_PATH, tools=registry_from_module(TOOLS_MODULE).specs),
    )
