"""What the commands share: the agent argument, `--tools`, `--llm` and loading the agent."""

from __future__ import annotations

import os
import time
from enum import StrEnum
from typing import Annotated

import typer

from engine.model import AgentSnapshot
from engine.tools.spec import ToolSpec
from waypoint.agent_source import AgentSource
from waypoint.cli.program import console


class LLMChoice(StrEnum):
    AUTO = "auto"
    OFFLINE = "offline"
    OPENAI = "openai"


LLMOption = Annotated[
    LLMChoice,
    typer.Option("--llm", help="auto = OpenAI when OPENAI_API_KEY is set, else offline"),
]
AGENT_HELP = "agent: a YAML/JSON file, a Python file (agent.py) or module:attribute building one"
AgentPath = Annotated[
    str | None,
    typer.Argument(help=f"{AGENT_HELP}; default: the banking concierge", show_default=False),
]
AgentRequired = Annotated[str, typer.Argument(help=AGENT_HELP)]
ToolsOption = Annotated[
    str | None,
    typer.Option("--tools", help="module with the tool registry, e.g. examples.banking.tools"),
]


def _choose_llm(choice: LLMChoice) -> str:
    """Set the provider for the runtime; returns a human description."""
    if choice is LLMChoice.AUTO:
        choice = LLMChoice.OPENAI if os.environ.get("OPENAI_API_KEY") else LLMChoice.OFFLINE
    if choice is LLMChoice.OPENAI and not (
        os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
    ):
        console.print("[red]--llm openai needs OPENAI_API_KEY (or OPENAI_BASE_URL).[/red]")
        raise typer.Exit(2)
    os.environ["WAYPOINT_LLM_PROVIDER"] = choice.value
    if choice is LLMChoice.OFFLINE:
        return "offline heuristic model (no key, no network)"
    return f"OpenAI-compatible model at {os.environ.get('OPENAI_BASE_URL', 'api.openai.com')}"


def _load(spec: str | None, tools: str | None) -> tuple[AgentSnapshot, str | None]:
    """The agent to run and its tools module (the banking concierge by default); a problem is
    told in one line (`OneLineErrors`)."""
    return AgentSource(spec, tools).load()


def _tool_specs(tools: str | None) -> list[ToolSpec] | None:
    from waypoint.agent_source import tool_specs

    return tool_specs(tools)


def _step(text: str) -> float:
    console.print(f"[dim]…[/dim] {text}")
    return time.perf_counter()
