"""`waypoint chat`: talk to an agent on the local stack, one message at a time.

While a turn runs, a spinner names its stage (`waypoint.turn_progress`); there is no overall time
limit — Ctrl-C stops waiting (a reply that comes later is shown before your next message). A
turn whose worker keeps failing is given up after `GIVE_UP_AFTER_FAILURES` attempts, with the
worker's own error in one line; a worker that died ends the chat with one line.

Commands: /help, /reset, /state, /trace, /reload, /quit (`COMMANDS`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape

from engine.model import AgentSnapshot
from engine.privacy.secrets import MASK, declared_secret_names
from engine.trace import TraceTitles, TurnTrace, explain, summarize
from waypoint.agent_source import AgentProblems, AgentSource, CliProblem
from waypoint.local_server import GenericChatClient, LocalServer

GIVE_UP_AFTER_FAILURES = 3
POLL_SECONDS = 0.2

COMMANDS = {
    "/help": "this list",
    "/reset": "start a new session (a new conversation with the same agent)",
    "/state": "the session: journeys and their steps, collected values, variables, version",
    "/trace": "the last turn's full trace (what matched and why, journeys, tools, LLM calls)",
    "/reload": "load the edited agent file and tools module again and publish them here",
    "/quit": "leave (Ctrl-D does too)",
}


class WorkerStopped(CliProblem):
    """The local turn worker is gone: no reply will ever come."""


class Chat:
    """One interactive chat over a running `LocalServer`."""

    def __init__(
        self,
        server: LocalServer,
        source: AgentSource,
        console: Console,
        *,
        show_trace: bool = False,
    ) -> None:
        self.server = server
        self.source = source
        self.console = console
        self.show_trace = show_trace
        self.client = self._new_client()

    @property
    def agent(self) -> AgentSnapshot:
        return self.server.agent

    def _new_client(self) -> GenericChatClient:
        return GenericChatClient(self.server, f"chat-{secrets.token_hex(3)}", "you")

    def close(self) -> None:
        self.client.close()

    # ---- the loop

    def run(self, read_line: Callable[[], str]) -> None:
        """Read lines until /quit, Ctrl-D or Ctrl-C at the prompt."""
        self.console.print("Type a message, or /help for commands (Ctrl-D to quit).")
        options: list[Mapping[str, Any]] = []
        while True:
            self._show_late_replies()
            try:
                text = read_line().strip()
            except (EOFError, KeyboardInterrupt):
                self.console.print()
                return
            if not text:
                continue
            if text.startswith("/"):
                if not self.command(text):
                    return
                continue
            reply = self.turn(text, choice=_chosen(options, text))
            if reply is not None:
                options = list(reply.get("options") or [])

    def command(self, line: str) -> bool:
        """Run a /command; False when the chat should end."""
        name = line.split()[0].lower()
        if name in ("/quit", "/exit"):
            return False
        handlers: dict[str, Callable[[], None]] = {
            "/help": self.help,
            "/reset": self.reset,
            "/state": self.state,
            "/trace": self.trace,
            "/reload": self.reload,
        }
        handler = handlers.get(name)
        if handler is None:
            self.console.print(f"[red]✗ unknown command {escape(name)}: /help lists them[/red]")
        else:
            handler()
        return True

    # ---- a turn

    def turn(self, text: str, *, choice: str | None = None) -> dict[str, Any] | None:
        """Send one message and show the reply; None when it did not come (given up, Ctrl-C)."""
        session_id = self.client.session_id
        poller = self.server.poller
        assert poller is not None
        failed_before = len(poller.failures_of(session_id))
        self.server.progress.report("queued")
        started = time.monotonic()
        self.client.post(text, choice=choice)
        try:
            with self.console.status("queued", spinner="dots") as status:
                while True:
                    reply = self.server.replies.poll(self.client.conversation_id, POLL_SECONDS)
                    if reply is not None:
                        break
                    if not poller.is_alive():
                        raise WorkerStopped(
                            "the local turn worker stopped; start `waypoint chat` again "
                            "(with --debug to see why)"
                        )
                    failures = poller.failures_of(session_id)[failed_before:]
                    if len(failures) >= GIVE_UP_AFTER_FAILURES:
                        self.console.print(
                            f"[red]✗ the turn failed {len(failures)} times: "
                            f"{escape(failures[-1])}[/red]\n  Fix it, then /reload (or /reset "
                            "for a new session); --debug shows the worker's log."
                        )
                        return None
                    retrying = f" — retrying after: {failures[-1]}" if failures else ""
                    status.update(
                        f"{escape(self.server.progress.stage)} "
                        f"[dim]{time.monotonic() - started:.0f} s{escape(retrying)}[/dim]"
                    )
        except KeyboardInterrupt:
            self.console.print(
                "[yellow]stopped waiting; the reply is shown when it comes "
                "(/reset starts over)[/yellow]"
            )
            return None
        self.show_reply(reply)
        if self.show_trace:
            self._print_lines(summarize(t, self.agent) if (t := self._last_trace()) else [])
        return reply

    def show_reply(self, reply: Mapping[str, Any], *, late: bool = False) -> None:
        prefix = "[dim](late)[/dim] " if late else ""
        self.console.print(f"{prefix}[bold green]agent ›[/bold green] {escape(reply['text'])}")
        for option in reply.get("options") or []:
            # `[small]` is an option id, not terminal markup
            self.console.print(
                f"   {escape('[' + str(option['id']) + ']')} {escape(option['label'])}"
            )

    def _show_late_replies(self) -> None:
        while (reply := self.server.replies.poll(self.client.conversation_id, 0)) is not None:
            self.show_reply(reply, late=True)

    # ---- commands

    def help(self) -> None:
        for name, what in COMMANDS.items():
            self.console.print(f"  {name:<8} {what}")

    def reset(self) -> None:
        self.client.close()
        self.client = self._new_client()
        self.console.print(f"new session {escape(self.client.session_id)}")

    def state(self) -> None:
        """The stored session, secrets masked (declared names, whatever the store holds)."""
        from infra.runtime import current_runtime

        session = asyncio.run(current_runtime().sessions.load(self.client.session_id))
        if session is None:
            self.console.print("no session yet: say something first")
            return
        secret_names = declared_secret_names(self.agent)
        lines = [f"session {session.id} · agent {session.agent_id} · {len(session.events)} events"]
        pinned = getattr(session, "agent_version", None) or getattr(session, "pinned_version", None)
        if pinned:
            lines.append(f"pinned version: {pinned}")
        trace = self._last_trace()
        if trace is not None:
            lines.append(f"last turn ran version: {trace.agent_version}")
        titles = TraceTitles(self.agent)
        for journey_id, path in session.journey_paths.items():
            steps = " → ".join(titles.step(journey_id, n) for n in path if n is not None)
            where = "active" if path and path[-1] is not None else "left"
            lines.append(f"journey {titles.journey(journey_id)} ({where}): {steps or '—'}")
        for journey_id in session.suspended_journeys:
            lines.append(f"journey {titles.journey(journey_id)}: waiting for a prerequisite")
        for journey_id in session.completed_journeys:
            lines.append(f"journey {titles.journey(journey_id)}: completed")
        for value in session.collected:
            shown = MASK if value.secret or value.name in secret_names else value.value
            lines.append(f"collected {titles.journey(value.journey_id)}.{value.name} = {shown}")
        for name, value in session.variables.items():
            lines.append(f"variable {name} = {MASK if name in secret_names else value}")
        if session.pending_confirmation is not None:
            lines.append(f"awaiting confirmation: {session.pending_confirmation.summary}")
        if session.principals:
            lines.append("logged in: " + ", ".join(sorted(session.principals)))
        self._print_lines(lines, dim=False)

    def trace(self) -> None:
        trace = self._last_trace()
        if trace is None:
            self.console.print("no turn yet: say something first")
            return
        self._print_lines(explain(trace, self.agent), dim=False)

    def reload(self) -> None:
        """Load the agent and tools again (edited files) and publish them to this stack."""
        try:
            agent, tools = self.source.load(fresh=True)
        except AgentProblems as exc:
            self.console.print(f"[red]✗ {escape(str(exc))}: still running the previous version[/]")
            for problem in exc.problems:
                self.console.print(f"  • {escape(problem)}")
            return
        except CliProblem as exc:
            self.console.print(f"[red]✗ {escape(str(exc))}[/red]")
            self.console.print("  still running the previous version")
            return
        version = self.server.republish(agent, tools)
        self.console.print(
            f"[green]✓ reloaded[/green] {escape(self.source.describe())}: agent {agent.id!r} "
            f"version {version} — {len(agent.guidelines)} guidelines, "
            f"{len(agent.journeys)} journeys, {len(agent.tools)} tools"
        )

    # ---- helpers

    def _last_trace(self) -> TurnTrace | None:
        return self.server.trace_of_last_turn(self.client.session_id)

    def _print_lines(self, lines: list[str], *, dim: bool = True) -> None:
        for line in lines:
            self.console.print(f"    [dim]{escape(line)}[/dim]" if dim else f"  {escape(line)}")


def _chosen(options: list[Mapping[str, Any]], text: str) -> str | None:
    """The option a typed line picks: its id or its label, as shown."""
    wanted = text.strip().strip("[]").casefold()
    for option in options:
        if wanted in (
            str(option.get("id", "")).casefold(),
            str(option.get("label", "")).casefold(),
        ):
            return str(option["id"])
    return None
