"""The agent-lifecycle commands behind `waypoint publish`, `waypoint diff` and `waypoint rollback`.

`cli.py` parses the arguments; this module does the work and prints the outcome:

- publish: check against the published version (sessions in flight, the deployed tool
  registry — `infra.agent_versions`), refuse unless `--force`, then publish;
- diff OLD NEW: the same comparison between two agent files, offline (tools against `--tools`
  when given);
- rollback AGENT [VERSION]: flip the published pointer back, atomically.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from engine.errors import AgentNotFound
from engine.model import AgentSnapshot
from engine.versioning.diff import PublishCheck, check_publish, describe_diff
from infra.runtime import PublishedAgent, Runtime


def print_check(console: Console, check: PublishCheck) -> None:
    """The diff and the risks of a publish, for a terminal."""
    if check.diff is not None:
        for line in describe_diff(check.diff):
            console.print(escape(line))
    if check.sessions_in_flight:
        console.print(f"sessions with a journey in flight: {check.sessions_in_flight}")
    if not check.tools_checked:
        console.print(
            "[yellow]! tools not checked: set WAYPOINT_TOOL_FUNCTION (the deployed tool "
            "function) or WAYPOINT_TOOLS_MODULE[/yellow]"
        )
    for risk in check.risks:
        console.print(f"[red]✗ {escape(risk.message)}[/red]")


def publish_with_checks(
    console: Console, runtime: Runtime, agent: AgentSnapshot, *, force: bool
) -> PublishedAgent | None:
    """Check, print, publish. None when refused (nothing was written)."""
    from infra.agent_versions import PublishRefused, publish_checked

    try:
        outcome = runtime.run(publish_checked(runtime, agent, force=force, in_deployment=False))
    except PublishRefused as refused:
        print_check(console, refused.check)
        console.print(
            "[red]✗ not published[/red]: fix the above (a `migrations:` entry moves sessions "
            "to renamed steps), or publish anyway with --force"
        )
        return None
    print_check(console, outcome.check)
    if outcome.forced:
        console.print("[yellow]! published with --force despite the problems above[/yellow]")
    return outcome.published


def check_only(console: Console, runtime: Runtime, agent: AgentSnapshot) -> bool:
    """Print what publishing `agent` now would change and refuse, writing nothing; True when
    it would be refused."""
    from engine.memory.stores import versioned
    from infra.agent_versions import check_publish_for

    check = runtime.run(check_publish_for(runtime, versioned(agent), in_deployment=False))
    print_check(console, check)
    verdict = "[red]would be refused[/red]" if check.refused else "[green]would publish[/green]"
    console.print(f"dry run: version {versioned(agent).version} {verdict}; nothing was written")
    return check.refused


def diff_files(
    console: Console, old: AgentSnapshot, new: AgentSnapshot, tools: list[str] | None
) -> bool:
    """Print what publishing `new` over `old` changes and would refuse (no sessions offline);
    True when a publish would be refused."""
    if old.id != new.id:
        console.print(f"[yellow]! different agents: {escape(old.id)} and {escape(new.id)}[/yellow]")
    check = check_publish(old, new, (), tools)
    print_check(console, check)
    return check.refused


def rollback_agent(console: Console, runtime: Runtime, agent_id: str, version: str | None) -> bool:
    """Flip the pointer back; False (and why) when it cannot."""
    from infra.agent_versions import rollback

    try:
        before, after = runtime.run(rollback(runtime, agent_id, version))
    except AgentNotFound as exc:
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        return False
    console.print(
        f"[green]✓ rolled back[/green] agent {agent_id!r}: {before} → {after} (sessions pinned "
        f"to {before} finish their journeys on it)"
    )
    return True
