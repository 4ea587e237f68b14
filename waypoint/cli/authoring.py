"""The commands that write and check an agent offline: `validate`, `graph`, `schema` and
`init` (a new project)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from waypoint.agent_source import AgentSource, CliProblem
from waypoint.cli.options import AGENT_HELP, AgentRequired, ToolsOption
from waypoint.cli.program import console, tell
from waypoint.graph_command import GraphFormat

if TYPE_CHECKING:
    from engine.model import AgentSnapshot


def validate(
    path: Annotated[
        str | None,
        typer.Argument(
            help=f"{AGENT_HELP}; default: the project's agent here (agent.yaml, or the agents "
            "its conversation tests name)",
            show_default=False,
        ),
    ] = None,
    tools: ToolsOption = None,
) -> None:
    """Check an agent definition and report every problem, each naming what to fix, then any
    warnings (allowed, but probably not meant: a reply in another language than the customer's).

    Every tool the agent names is checked against its tools module's @tool registry (and tools
    named only take their declaration from it): --tools, else the tools.py beside the agent
    file. Without AGENT, the project in the working directory: its agent file with its tools,
    else the agents (and tools) its conversation tests name, as `waypoint test` runs them."""
    from waypoint.project import project_agents

    if path is not None:
        _validate(AgentSource(path, tools))
        return
    sources = project_agents(Path.cwd())
    if tools is not None:
        sources = [AgentSource(s.spec, tools) for s in sources]
    failed = 0
    for source in sources:  # each agent told, the first failure's exit code kept
        try:
            _validate(source)
        except CliProblem as exc:
            failed = failed or exc.code
            tell(exc)
    if failed:
        raise typer.Exit(failed)


def _validate(source: AgentSource) -> None:
    from engine.validation.agent import warnings

    agent, tools_module = source.load()
    nodes = sum(len(j.nodes) for j in agent.journeys)
    registry = f" (@tool registry: {tools_module})" if tools_module else ""
    console.print(
        f"[green]✓ {escape(source.describe())}[/green]: agent {agent.id!r} version "
        f"{agent.version} — {len(agent.guidelines)} guidelines, {len(agent.journeys)} journeys "
        f"({nodes} steps), {len(agent.tools)} tools{escape(registry)}, "
        f"{len(agent.canned_responses)} canned responses"
    )
    _tell_bedrock_models(agent)
    found = warnings(agent)
    if found:  # allowed, so the agent is valid; each says what a customer would get instead
        console.print(f"[yellow]! {len(found)} warning{'s' if len(found) > 1 else ''}:[/yellow]")
        for warning in found:
            console.print(f"  • {escape(warning)}")


def _tell_bedrock_models(agent: AgentSnapshot) -> None:
    """The Bedrock models the agent routes to, as template.yaml's parameters that grant them:
    ids with the `bedrock:` prefix, and bare ones when Bedrock is the default provider here."""
    from engine.agent_config import ModelRef
    from engine.errors import LLMError
    from engine.validation.models import routed_models
    from infra.llm.bedrock_client import template_parameters
    from infra.llm.factory import resolve_provider

    try:
        default = resolve_provider()
    except LLMError:
        default = None
    refs = [ModelRef.parse(model_id) for model_id in routed_models(agent.config)]
    ids = [r.model for r in refs if (r.provider or default) == "bedrock"]
    if not ids:
        return
    parameters = " ".join(f"{k}={v}" for k, v in template_parameters(ids).items() if v)
    console.print(
        f"  Bedrock models: {escape(', '.join(ids))} — deploy with {escape(parameters)} "
        "(template.yaml; add your Bedrock embedding model to BedrockModelIds)",
        highlight=False,
    )


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
        "  waypoint validate\n"
        "  waypoint test\n"
        "  waypoint chat agent.yaml\n"
        "Deploying: see README.md there (sam build && sam deploy --guided).",
        highlight=False,
    )
