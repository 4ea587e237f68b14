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
    """The validated concierge snapshot. Snapshots are immutable, so one is read and validated
    once per process and shared until `agent.yaml` changes (its size or modification time): the
    demo, the benchmarks and a thousand tests load it."""
    from engine.authoring import load_agent  # not when a Lambda imports the tools module

    global _loaded
    stat = AGENT_PATH.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    if _loaded is None or _loaded[0] != key:
        _loaded = (key, load_agent(AGENT_PATH))
    return _loaded[1]


_loaded: tuple[tuple[int, int], AgentSnapshot] | None = None
