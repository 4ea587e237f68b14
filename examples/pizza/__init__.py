"""The pizza shop: `agent.yaml` (behavior) + `tools.py` (implementations) + `shop.py` (the shop)."""

from __future__ import annotations

from pathlib import Path

from engine.authoring import load_agent
from engine.model import AgentSnapshot
from engine.toolkit import registry_from_module

AGENT_PATH = Path(__file__).with_name("agent.yaml")
TOOLS_MODULE = "examples.pizza.tools"


def load() -> AgentSnapshot:
    """The validated pizza shop snapshot; its tools are declared by their @tool functions."""
    return load_agent(AGENT_PATH, tools=registry_from_module(TOOLS_MODULE).specs)
