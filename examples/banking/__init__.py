"""The banking concierge: `agent.yaml` (behavior) + `tools.py` (implementations) + `bank.py`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.model import AgentSnapshot

AGENT_PATH = Path(__file__).with_name("agent.yaml")
TOOLS_MODULE = "examples.banking.tools"

# The seed conversation (tests/seed_transfer.conv.yaml), what the customer says: `waypoint demo`
# plays it, and the offline model's CPU benchmark measures it.
SEED_CONVERSATION = (
    "Hi",
    "Transfer money",
    "seldo",
    "monkey",
    "Checking",
    "To account ID 1234324",
    "500",
)


def load() -> AgentSnapshot:
    """The validated concierge snapshot (read once per process: `examples.loaded_once`)."""
    from engine.authoring import load_agent  # not when a Lambda imports the tools module
    from examples import loaded_once

    return loaded_once(AGENT_PATH, lambda: load_agent(AGENT_PATH))
