"""The banking concierge: `agent.yaml` (behavior) + `tools.py` (implementations) + `bank.py`."""

from __future__ import annotations

from pathlib import Path

from engine.authoring import load_agent
from engine.model import AgentSnapshot

AGENT_PATH = Path(__file__).with_name("agent.yaml")
TOOLS_MODULE = "examples.banking.tools"


def load() -> AgentSnapshot:
    """The validated concierge snapshot."""
    return load_agent(AGENT_PATH)
