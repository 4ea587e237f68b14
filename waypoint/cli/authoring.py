"""The commands that write and check an agent offline: `validate`, `graph`, `schema` and
`init` (a new project)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from waypoint.agent_source import AgentSource
from waypoint.cli.options import AgentRequired, ToolsOption, _load
from waypoint.cli.program import console
from waypoint.graph_command import GraphFormat


def validate(path: AgentRequired, tools: ToolsOption = None) -> None:
    """Check an agent definition and report every problem, each naming what to fix, then any
    warnings (allowed, but probably not meant: a reply in another language than the customer's).

    With --tools, every tool the agent names is checked against the module's @tool registry
    (and tools named only take their declaration from it)."""
    from engine.validation.agent import warnings

    agent, _ = _load(path, tools)
    nodes = sum(len(j.nodes) for j in agent.journeys)
    console.print(
        f"[green]✓ {escape(path)}[/green]: agent {agent.id!r} version {agent.version} — "
        f"{len(agent.guidelines)} guidelines, {len(agent.journeys)} journeys ({nodes} steps), "
        f"{len(agent.tools)} tools, {len(agent.canned_responses)} canned responses"
    )
    found = warnings(agent)
    if found:  # allowed, so the agent is valid; each says what a customer would get instead
        console.print(f"[yellow]! {len(found)} warning{'s' if len(found) > 1 else ''}:[/yellow]")
        for warning in found:
            console.print(f"  • {escape(warning)}")


def graph(
    path: AgentRequired,
    journey: Annotated[
        str | None, typer.Option("--journey", help="draw only this journey (default: all)")
    ] = None,
    fmt: Annotated[
        GraphFormat | None,
        typer.Option("--format", help="default: svg for an .svg --output, else mermaid"),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write here instead of stdout")
    ] = None,
    tools: ToolsOption = None,
) -> None:
    """Draw the agent's journeys: chat / tool / fork steps, conditions on the transitions,
    `requires` between journeys — as Mermaid (for Markdown) or a standalone SVG."""
    from waypoint.graph_command import run_graph

    written = run_graph(AgentSource(path, tools), journey, fmt, output)
    if written is not None:
        console.print(f"[green]✓ wrote {escape(str(written))}[/green]")


def schema(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write here instead of stdout")
    ] = None,
) -> None:
    """Print the JSON Schema of agent.yaml (docs/agent.schema.json is this output)."""
    from engine.authoring.document_schema import agent_document_schema_text

    text = agent_document_schema_text()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"[green]✓ wrote {escape(str(output))}[/green]")


def init(
    name: Annotated[str, typer.Argument(help="the project's name, also its agent id")],
    directory: Annotated[
        Path | None, typer.Option("--directory", help="where to create it (default: ./NAME)")
    ] = None,
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="a Waypoint wheel to deploy with the project (copied in)"),
    ] = None,
) -> None:
    """Create a new agent project: agent.yaml, tools.py, conversation tests, a SAM template."""
    from waypoint.scaffold import ScaffoldError, init_project

    try:
        project = init_project(name, directory, wheel=wheel)
    except ScaffoldError as exc:
        console.print(f"✗ {exc}", style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    console.print(f"[green]✓ created {escape(str(project.directory))}[/green]")
    for relative in project.files:
        console.print(f"  {escape(relative.as_posix())}", highlight=False)
    console.print(
        f"\nNext:\n  cd {escape(str(project.directory))}\n"
        "  waypoint validate agent.yaml --tools tools\n"
        "  waypoint test\n"
        "  waypoint chat agent.yaml --tools tools\n"
        "Deploying: see README.md there (sam build && sam deploy --guided).",
        highlight=False,
    )
