"""`waypoint` — the command line: demo, chat, serve, validate, test, publish, init.

Everything here runs the same engine, adapters and Lambda handlers as a deployment; the local
commands put moto in place of AWS and the offline model in place of OpenAI (unless
`OPENAI_API_KEY` is set or `--llm openai` is given).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from engine.errors import InvalidAgentDefinition
from engine.model import AgentSnapshot, ToolSpec

app = typer.Typer(
    help="Waypoint: serverless agents that follow business rules.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

SEED_CONVERSATION = [
    "Hi",
    "Transfer money",
    "seldo",
    "monkey",
    "Checking",
    "To account ID 1234324",
    "500",
]


class LLMChoice(StrEnum):
    AUTO = "auto"
    OFFLINE = "offline"
    OPENAI = "openai"


LLMOption = Annotated[
    LLMChoice,
    typer.Option("--llm", help="auto = OpenAI when OPENAI_API_KEY is set, else offline"),
]
AgentPath = Annotated[
    Path | None,
    typer.Argument(help="agent definition (YAML/JSON); default: the banking concierge"),
]
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


def _load(path: Path | None, tools: str | None) -> tuple[AgentSnapshot, str | None]:
    """The agent to run and its tools module (the banking concierge by default)."""
    if path is None:
        from examples.banking import TOOLS_MODULE
        from examples.banking import load as load_bank

        return load_bank(), tools or TOOLS_MODULE
    from engine.authoring import load_agent

    if not path.exists():
        console.print(f"[red]✗ {escape(str(path))} does not exist[/red]")
        raise typer.Exit(2)
    try:
        return load_agent(path, tools=_tool_specs(tools)), tools
    except InvalidAgentDefinition as exc:
        _print_problems(path, exc)
        raise typer.Exit(1) from None


def _tool_specs(tools: str | None) -> list[ToolSpec] | None:
    """The @tool registry's specs of `tools` (a module), so an agent file may name its tools
    only; one clear line and exit 2 when the module cannot be used."""
    if tools is None:
        return None
    from engine.toolkit import ToolRegistryNotConfigured, registry_from_module

    sys.path.insert(0, os.getcwd())  # a tools module beside the agent file imports
    try:
        return registry_from_module(tools, setting="--tools").specs
    except ToolRegistryNotConfigured as exc:
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        raise typer.Exit(2) from None


def _print_problems(path: Path, exc: InvalidAgentDefinition) -> None:
    console.print(f"[red]✗ {escape(str(path))}: {len(exc.problems)} problem(s)[/red]")
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
    from engine.trace import summarize
    from examples.banking import TOOLS_MODULE, bank
    from examples.banking import load as load_bank
    from waypoint.local_server import GenericChatClient, LocalServer

    model = _choose_llm(llm)
    console.print(Panel.fit("Waypoint demo — the banking concierge", style="bold"))
    started = _step("starting the local stack: moto (DynamoDB, S3, SQS) from template.yaml")
    bank.reset_bank()
    server = LocalServer(load_bank(), tools_module=TOOLS_MODULE)
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
            console.print(f"[bold cyan]customer ›[/bold cyan] {text}")
            console.print(f"[bold green]agent    ›[/bold green] {reply['text']}")
            trace = server.trace_of_last_turn(client.session_id)
            if trace is not None:
                lines = summarize(trace)
                shown = lines if verbose else [ln for ln in lines if not ln.startswith("note:")]
                for line in shown:
                    console.print(f"    [dim]{line}[/dim]")
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
    """Talk to an agent interactively on the local stack (Ctrl-D to quit)."""
    from engine.trace import summarize
    from waypoint.local_server import GenericChatClient, LocalServer

    agent, tools_module = _load(path, tools)
    model = _choose_llm(llm)
    _step(f"starting the local stack for agent {agent.id!r} ({model})")
    with LocalServer(agent, tools_module=tools_module) as server:
        client = GenericChatClient(server, f"chat-{secrets.token_hex(3)}", "you")
        console.print("Type a message (Ctrl-D to quit).")
        while True:
            try:
                text = console.input("[bold cyan]you ›[/bold cyan] ").strip()
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            if not text:
                continue
            reply = client.send(text)
            console.print(f"[bold green]agent ›[/bold green] {reply['text']}")
            for option in reply.get("options") or []:
                console.print(f"   [{option['id']}] {option['label']}")
            if trace:
                turn = server.trace_of_last_turn(client.session_id)
                for line in summarize(turn) if turn else []:
                    console.print(f"    [dim]{line}[/dim]")
        client.close()


DEFAULT_DATA_DIR = Path(".waypoint")
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
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (0: any free port)")] = 8750,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help=f"directory keeping sessions, agents and queued messages across restarts "
            f"(default: ./{DEFAULT_DATA_DIR})",
        ),
    ] = None,
    ephemeral: Annotated[
        bool, typer.Option("--ephemeral", help="keep everything in memory (lost on exit)")
    ] = False,
) -> None:
    """Serve webhooks, the management API and the turn worker locally (for a real front end)."""
    from infra.aws.moto_persistence import LocalStateError
    from waypoint.local_server import LocalServer

    if ephemeral and data is not None:
        console.print("[red]--data and --ephemeral exclude each other: choose one.[/red]")
        raise typer.Exit(2)
    data_dir = None if ephemeral else (data or DEFAULT_DATA_DIR)
    agent, tools_module = _load(path, tools)
    model = _choose_llm(llm)
    key, generic = _served_secrets(data_dir)
    server = LocalServer(
        agent,
        tools_module=tools_module,
        host=host,
        port=port,
        management_api_key=key,
        generic_secret=generic,
        data_dir=data_dir,
    )
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
        console.print(f"generic channel secret: {generic}")
        if data_dir is None:
            console.print("state           in memory (--ephemeral): lost when this stops")
        else:
            how = "restored from" if server.stack.restored else "new, kept in"
            console.print(f"state           {how} {data_dir}")
        console.print("\nTo publish another agent to this stack from another shell:")
        for name, value in server.client_env().items():
            console.print(f"  export {name}={value}")
        console.print("  waypoint publish path/to/agent.yaml\n\nCtrl-C to stop.")
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        server.stop()


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="agent definition (YAML/JSON)")],
    tools: ToolsOption = None,
) -> None:
    """Check an agent definition and report every problem, each naming what to fix.

    With --tools, every tool the agent names is checked against the module's @tool registry
    (and tools named only take their declaration from it)."""
    from engine.authoring import load_agent

    if not path.exists():
        console.print(f"[red]✗ {path} does not exist[/red]")
        raise typer.Exit(2)
    specs = _tool_specs(tools)
    try:
        agent = load_agent(path, tools=specs)
    except InvalidAgentDefinition as exc:
        _print_problems(path, exc)
        raise typer.Exit(1) from None
    nodes = sum(len(j.nodes) for j in agent.journeys)
    console.print(
        f"[green]✓ {path}[/green]: agent {agent.id!r} version {agent.version} — "
        f"{len(agent.guidelines)} guidelines, {len(agent.journeys)} journeys ({nodes} steps), "
        f"{len(agent.tools)} tools, {len(agent.canned_responses)} canned responses"
    )


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
    path: Annotated[Path, typer.Argument(help="agent definition (YAML/JSON)")],
    tools: ToolsOption = None,
    llm: LLMOption = LLMChoice.AUTO,
) -> None:
    """Publish a version: embeddings to S3, then the agent to DynamoDB (atomic pointer flip).

    Targets whatever the environment points at: AWS with your credentials and WAYPOINT_TABLE /
    WAYPOINT_BUCKET, or a running `waypoint serve` (export the variables it prints)."""
    from infra.aws.clients import AwsConfigurationError
    from infra.runtime import current_runtime

    agent, _ = _load(path, tools)
    _choose_llm(llm)  # the embedder follows the provider
    runtime = current_runtime()
    try:
        published = runtime.run(runtime.publish_agent(agent))
    except AwsConfigurationError as exc:
        console.print(f"[red]✗ {exc}[/red]")
        raise typer.Exit(2) from None
    vectors = ", ".join(f"{n}: {c}" for n, c in published.embedded.items()) or "none"
    console.print(
        f"[green]✓ published[/green] agent {published.agent_id!r} version {published.version} "
        f"(embeddings — {vectors})"
    )


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
    try:
        return app()
    except TimeoutError as exc:
        console.print(f"[red]✗ {exc}[/red]")
        sys.exit(1)


if __name__ == "__main__":
    main()
