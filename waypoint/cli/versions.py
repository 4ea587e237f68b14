"""The commands that move an agent's published version: `publish`, `diff` (what a publish would
change) and `rollback`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from engine.model import AgentSnapshot
from waypoint.cli.options import (
    AgentRequired,
    LLMChoice,
    LLMOption,
    ToolsOption,
    _choose_llm,
    _load,
    _tool_specs,
)
from waypoint.cli.program import console


def publish(
    path: AgentRequired,
    tools: ToolsOption = None,
    llm: LLMOption = LLMChoice.AUTO,
    force: Annotated[
        bool,
        typer.Option("--force", help="publish even if it strands sessions or lacks tools"),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="only show the check; write nothing")
    ] = False,
) -> None:
    """Publish a version: embeddings to S3, then the agent to DynamoDB (atomic pointer flip).

    Targets whatever the environment points at: AWS with your credentials and WAYPOINT_TABLE /
    WAYPOINT_BUCKET, or a running `waypoint serve` (export the variables it prints). Refused,
    unless --force, when sessions are in a journey or step it removes, or a tool it needs is
    not deployed (docs/deploy.md, "Publishing changes")."""
    from infra.aws.clients import AwsConfigurationError
    from infra.runtime import current_runtime
    from waypoint.publishing import check_only, publish_with_checks

    agent, _ = _load(path, tools)
    _choose_llm(llm)  # the embedder follows the provider
    runtime = current_runtime()
    try:
        if dry_run:
            raise typer.Exit(1 if check_only(console, runtime, agent) else 0)
        published = publish_with_checks(console, runtime, agent, force=force)
    except AwsConfigurationError as exc:
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        raise typer.Exit(2) from None
    if published is None:
        raise typer.Exit(1)
    vectors = ", ".join(f"{n}: {c}" for n, c in published.embedded.items()) or "none"
    console.print(
        f"[green]✓ published[/green] agent {published.agent_id!r} version {published.version} "
        f"(embeddings — {vectors})"
    )


def diff(
    old: Annotated[Path, typer.Argument(help="the agent file as published now")],
    new: Annotated[Path, typer.Argument(help="the agent file you mean to publish")],
    tools: ToolsOption = None,
) -> None:
    """Show what publishing NEW over OLD changes, offline; exit 1 if publish would refuse it."""
    from waypoint.publishing import diff_files

    before, after = _load_declared(old, tools), _load_declared(new, tools)
    specs = _tool_specs(tools)
    refused = diff_files(console, before, after, [s.name for s in specs] if specs else None)
    raise typer.Exit(1 if refused else 0)


def _load_declared(path: Path, tools: str | None) -> AgentSnapshot:
    """The agent as its file declares it (so `diff` itself compares its tools with the
    registry), or resolved with `tools` when the file names its tools only."""
    from engine.authoring import load_agent
    from engine.errors import InvalidAgentDefinition

    try:
        return load_agent(path)
    except (InvalidAgentDefinition, OSError):
        return _load(str(path), tools)[0]


def rollback(
    agent: Annotated[str, typer.Argument(help="agent id")],
    version: Annotated[
        str | None, typer.Argument(help="version to publish again (default: the previous one)")
    ] = None,
) -> None:
    """Point the agent back at an earlier version, atomically (same targets as publish)."""
    from infra.runtime import current_runtime
    from waypoint.publishing import rollback_agent

    if not rollback_agent(console, current_runtime(), agent, version):
        raise typer.Exit(1)
