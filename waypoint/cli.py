"""`waypoint` — the command line: demo, chat, serve, init, validate, graph, test, publish, diff,
rollback.

Everything here runs the same engine, adapters and Lambda handlers as a deployment; the local
commands put moto in place of AWS and the offline model in place of OpenAI (unless
`OPENAI_API_KEY` is set or `--llm openai` is given).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
import traceback
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from typer.core import TyperGroup

from engine.model import AgentSnapshot, ToolSpec
from waypoint.agent_source import AgentProblems, AgentSource, CliProblem, failure_summary
from waypoint.graph_command import GraphFormat

console = Console()
DEBUG_ENV = "WAYPOINT_DEBUG"


class OneLineErrors(TyperGroup):
    """Every command's failure as one line saying what to do — a traceback only with --debug
    (or WAYPOINT_DEBUG=1)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if _command_line_control(exc):  # exits, aborts, usage errors: printed by click
                raise
            raise _told(exc) from None


def _command_line_control(exc: Exception) -> bool:
    """typer's and click's own exceptions (typer vendors a click of its own)."""
    return type(exc).__module__.split(".")[0] in ("click", "typer")


def _told(exc: Exception) -> typer.Exit:
    """Print `exc` the way the user should see it; the exit to raise. Re-raises it under
    --debug when nobody planned for it (its traceback is the point then)."""
    if isinstance(exc, AgentProblems):
        _print_problems(exc)
        return typer.Exit(exc.code)
    if isinstance(exc, CliProblem):
        if _debugging() and exc.__cause__ is not None:
            console.print("".join(traceback.format_exception(exc.__cause__)), markup=False)
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        return typer.Exit(exc.code)
    if _debugging():
        raise exc
    console.print(
        f"[red]✗ {escape(failure_summary(exc))}[/red]\n  Run again with --debug for the traceback."
    )
    return typer.Exit(1)


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


app = typer.Typer(
    help="Waypoint: serverless agents that follow business rules.",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineErrors,
)


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks and the local stack's logs")
    ] = False,
) -> None:
    """Waypoint: serverless agents that follow business rules."""
    if debug:
        os.environ[DEBUG_ENV] = "1"


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
DEFAULT_DATA_DIR = Path(".waypoint")
# What `serve` and `studio` share: where the local stack listens and where it keeps its data.
HostOption = Annotated[str, typer.Option(help="interface to listen on")]
PortOption = Annotated[int, typer.Option(help="HTTP port (0: any free port)")]
DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help=f"directory keeping sessions, agents and queued messages across restarts "
        f"(default: ./{DEFAULT_DATA_DIR})",
    ),
]
EphemeralOption = Annotated[
    bool, typer.Option("--ephemeral", help="keep everything in memory (lost on exit)")
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


def _print_problems(exc: AgentProblems) -> None:
    console.print(f"[red]✗ {escape(str(exc))}[/red]")
    for problem in exc.problems:
        # Paths like `guidelines[greet]` are not terminal markup: print them as written.
        console.print(f"  • {escape(problem)}")
    console.print("Fix them and run [bold]waypoint validate[/bold] again.")


def _step(text: str) -> float:
    console.print(f"[dim]…[/dim] {text}")
    return time.perf_counter()


# --------------------------------------------------------------------------------------------------


@app.command()
def demo(
    llm: LLMOption = LLMChoice.AUTO,
    verbose: Annotated[bool, typer.Option(help="show the full trace of every turn")] = False,
) -> None:
    """Run the banking concierge end to end on the local stack and print the transcript."""
    from engine.trace import explain, summarize
    from examples.banking import SEED_CONVERSATION, TOOLS_MODULE, bank
    from examples.banking import load as load_bank
    from waypoint.local_server import GenericChatClient, LocalServer

    model = _choose_llm(llm)
    console.print(Panel.fit("Waypoint demo — the banking concierge", style="bold"))
    started = _step("starting the local stack: moto (DynamoDB, S3, SQS) from template.yaml")
    bank.reset_bank()
    agent = load_bank()
    server = LocalServer(agent, tools_module=TOOLS_MODULE)
    server.start()
    try:
        console.print(
            f"[dim]…[/dim] webhook, worker and management API up at {server.base_url} "
            f"in {time.perf_counter() - started:.1f} s; model: {model}"
        )
        console.print(
            "[dim]… the customer writes through the generic channel: HMAC-signed webhook → "
            "dedup → SQS FIFO → turn worker → signed callback[/dim]\n"
        )
        client = GenericChatClient(server, f"demo-{secrets.token_hex(3)}", "seldo")
        for text in SEED_CONVERSATION:
            t0 = time.perf_counter()
            reply = client.send(text)
            elapsed = time.perf_counter() - t0
            console.print(f"[bold cyan]customer ›[/bold cyan] {escape(text)}")
            console.print(f"[bold green]agent    ›[/bold green] {escape(reply['text'])}")
            trace = server.trace_of_last_turn(client.session_id)
            if trace is not None:
                if verbose:
                    shown = explain(trace, agent)
                else:
                    lines = summarize(trace, agent)
                    shown = [ln for ln in lines if not ln.startswith("note:")]
                for line in shown:
                    console.print(f"    [dim]{escape(line)}[/dim]")
            console.print(f"    [dim]round trip {elapsed * 1000:.0f} ms[/dim]")
        client.close()
        transfers = bank.BANK.transfers
        console.print()
        # The seed's conversation asks for $500 from the checking account to 1234324: exactly
        # that, once — not merely one transfer of something.
        expected = [{"from": "1234567890", "to": "1234324", "amount": "500.00"}]
        if transfers == expected:
            t = transfers[0]
            console.print(
                f"[green]✓ exactly one transfer: ${t['amount']} from {t['from']} to {t['to']}[/green]"
            )
        else:
            console.print(
                f"[red]✗ expected one transfer of $500.00 from 1234567890 to 1234324, the bank "
                f"recorded {transfers}[/red]"
            )
            raise typer.Exit(1)
    finally:
        server.stop()


@app.command()
def chat(
    path: AgentPath = None,
    tools: ToolsOption = None,
    llm: LLMOption = LLMChoice.AUTO,
    trace: Annotated[bool, typer.Option("--trace", help="show each turn's trace")] = False,
) -> None:
    """Talk to an agent interactively on the local stack (/help for commands, Ctrl-D to quit).

    /reset starts a new session, /state shows it, /trace explains the last turn, /reload loads
    the edited agent and tools again. A spinner names the stage of the turn in flight; Ctrl-C
    stops waiting for a slow one."""
    from waypoint.chat import Chat
    from waypoint.local_server import LocalServer

    source = AgentSource(path, tools)
    agent, tools_module = source.load()
    model = _choose_llm(llm)
    if not _debugging():
        # The worker's JSON logs would interleave with the conversation; its failures are told
        # in one line by the chat instead (--debug keeps them).
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")
        logging.getLogger("waypoint.local").setLevel(logging.CRITICAL)
    _step(f"starting the local stack for agent {agent.id!r} ({model})")
    with LocalServer(agent, tools_module=tools_module) as server:
        session = Chat(server, source, console, show_trace=trace)
        try:
            session.run(lambda: console.input("[bold cyan]you ›[/bold cyan] "))
        finally:
            session.close()


SECRETS_FILE = "secrets.json"


def _served_secrets(data: Path | None) -> tuple[str, str]:
    """The management API key and the generic channel secret: from the environment, else kept in
    the data directory (a restart must not invalidate the front end's configuration), else new."""
    import json

    stored: dict[str, str] = {}
    path = data / SECRETS_FILE if data is not None else None
    if path is not None and path.exists():
        stored = json.loads(path.read_text(encoding="utf-8"))
    key = os.environ.get("WAYPOINT_MANAGEMENT_API_KEY") or stored.get("management_api_key")
    generic = os.environ.get("WAYPOINT_GENERIC_SECRET") or stored.get("generic_secret")
    key = key or secrets.token_urlsafe(24)
    generic = generic or secrets.token_urlsafe(24)
    if path is not None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written once, readable by this user only: these are credentials of the local stack.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            json.dump({"management_api_key": key, "generic_secret": generic}, f)
    return key, generic


@app.command()
def serve(
    path: AgentPath = None,
    tools: ToolsOption = None,
    llm: LLMOption = LLMChoice.AUTO,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8750,
    data: DataOption = None,
    ephemeral: EphemeralOption = False,
) -> None:
    """Serve webhooks, the management API, the studio page (at `/`) and the turn worker
    locally (for a real front end)."""
    _serve(path, tools, llm, host, port, data, ephemeral, open_browser=False)


@app.command()
def studio(
    path: AgentPath = None,
    tools: ToolsOption = None,
    llm: LLMOption = LLMChoice.AUTO,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8750,
    data: DataOption = None,
    ephemeral: EphemeralOption = False,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="print the page's address instead of opening it")
    ] = False,
    api: Annotated[
        str | None,
        typer.Option(
            "--api",
            help="a remote management API (a deployed stack's ManagementApiUrl): serve only the "
            "page, pointed at it, and start no local stack. The API must allow this page's "
            "origin (StudioOrigins).",
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option("--key", help="with --api: its key, put in the page's address fragment"),
    ] = None,
) -> None:
    """`serve`, and open the studio page in the browser: chat with the agent, list sessions,
    inspect any turn (guidelines, journeys on their graphs, tool calls, LLM calls). With
    `--api URL`, only the page, against that (deployed) management API."""
    if api is not None:
        from waypoint.studio.page_cli import serve_page_only

        if path is not None or tools is not None or data is not None or ephemeral:
            console.print("[red]--api serves only the page: no agent, --tools, --data or "
                          "--ephemeral (the remote stack has its own).[/red]")  # fmt: skip
            raise typer.Exit(2)
        serve_page_only(console, api, key, host, port, open_browser=not no_browser)
        return
    if key is not None:
        console.print("[red]--key goes with --api (the local stack makes its own key).[/red]")
        raise typer.Exit(2)
    _serve(path, tools, llm, host, port, data, ephemeral, open_browser=not no_browser)


def _local_server(
    agent: Any, tools_module: str | None, host: str, port: int, key: str, generic: str,
    data_dir: Path | None,
) -> Any:  # fmt: skip
    """The LocalServer `serve` and `studio` run (not started)."""
    from waypoint.local_server import LocalServer

    return LocalServer(
        agent,
        tools_module=tools_module,
        host=host,
        port=port,
        management_api_key=key,
        generic_secret=generic,
        data_dir=data_dir,
        log_line=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True),
    )


def _serve(
    path: str | None,
    tools: str | None,
    llm: LLMChoice,
    host: str,
    port: int,
    data: Path | None,
    ephemeral: bool,
    *,
    open_browser: bool,
) -> None:
    from functions.management_cors import InvalidCorsOrigins
    from infra.aws.moto_persistence import LocalStateError

    if ephemeral and data is not None:
        console.print("[red]--data and --ephemeral exclude each other: choose one.[/red]")
        raise typer.Exit(2)
    data_dir = None if ephemeral else (data or DEFAULT_DATA_DIR)
    agent, tools_module = _load(path, tools)
    model = _choose_llm(llm)
    key, generic = _served_secrets(data_dir)
    try:
        server = _local_server(agent, tools_module, host, port, key, generic, data_dir)
    except InvalidCorsOrigins as exc:
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        raise typer.Exit(2) from None
    try:
        server.start()
    except LocalStateError as exc:
        server.stop()
        console.print(f"[red]✗ {exc}[/red]")
        raise typer.Exit(2) from None
    try:
        console.print(Panel.fit(f"Waypoint serving agent {agent.id!r} — {model}", style="bold"))
        console.print(f"webhooks        {server.base_url}/webhooks/{{channel}}")
        console.print(f"management API  {server.base_url}/api   (header X-Api-Key: {key})")
        console.print(f"API reference   {server.base_url}/api/docs")
        # The key travels in the fragment: browsers never send it to any server.
        studio_url = f"{server.base_url}/#key={key}"
        console.print(f"studio          {studio_url}")
        if open_browser:
            import webbrowser

            webbrowser.open(studio_url)
        console.print(f"generic channel secret: {generic}")
        if data_dir is None:
            console.print("state           in memory (--ephemeral): lost when this stops")
        else:
            how = "restored from" if server.stack.restored else "new, kept in"
            console.print(f"state           {how} {data_dir}")
        console.print("\nTo publish another agent to this stack from another shell:")
        for name, value in server.client_env().items():
            console.print(f"  export {name}={value}")
        console.print(
            "  waypoint publish path/to/agent.yaml\n\nCtrl-C to stop. Requests and turns:"
        )
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        server.stop()


@app.command()
def validate(path: AgentRequired, tools: ToolsOption = None) -> None:
    """Check an agent definition and report every problem, each naming what to fix.

    With --tools, every tool the agent names is checked against the module's @tool registry
    (and tools named only take their declaration from it)."""
    agent, _ = _load(path, tools)
    nodes = sum(len(j.nodes) for j in agent.journeys)
    console.print(
        f"[green]✓ {escape(path)}[/green]: agent {agent.id!r} version {agent.version} — "
        f"{len(agent.guidelines)} guidelines, {len(agent.journeys)} journeys ({nodes} steps), "
        f"{len(agent.tools)} tools, {len(agent.canned_responses)} canned responses"
    )


@app.command()
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


@app.command("test")
def test_command(
    path: Annotated[
        Path, typer.Argument(help="a conversation test file, or a folder of *.conv.yaml")
    ] = Path("."),
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, help="run each test N times; report pass^N")
    ] = 1,
    junit_xml: Annotated[
        Path | None, typer.Option("--junit-xml", help="also write JUnit XML here (for CI)")
    ] = None,
    llm: LLMOption = LLMChoice.AUTO,
) -> None:
    """Run conversation tests: scripted turns against your agent, expectations checked per turn
    (docs/conversation-tests.md). Exit code 1 when a test fails, 2 when none can run."""
    from infra.conversation_report import Totals, render_outcome, render_summary, write_junit
    from infra.conversation_tests import InvalidConversationTest, collect_tests, run_tests

    console.print(f"[dim]model: {_choose_llm(llm)}[/dim]")
    try:
        tests = collect_tests(path)
    except InvalidConversationTest as exc:
        console.print(f"✗ {exc}", style="red", markup=False, highlight=False)
        raise typer.Exit(2) from None
    if not tests:
        console.print(f"[red]✗ no conversation tests (*.conv.yaml) under {path}[/red]")
        raise typer.Exit(2)
    outcomes = run_tests(tests, repeat=repeat)
    for outcome in outcomes:
        console.print(render_outcome(outcome), markup=False, highlight=False, soft_wrap=True)
    totals = Totals.of(outcomes)
    console.print(render_summary(totals, repeat), markup=False, highlight=False, soft_wrap=True)
    if junit_xml is not None:
        write_junit(outcomes, junit_xml)
    raise typer.Exit(1 if totals.failed else 0)


@app.command()
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


@app.command()
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


@app.command()
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
        return _load(path, tools)[0]


@app.command()
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


@app.command()
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


def main() -> Any:
    """Console-script entry point."""
    return app()


if __name__ == "__main__":
    main()
