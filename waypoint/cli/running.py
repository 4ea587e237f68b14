"""The commands that run an agent on the local stack: `demo`, `chat`, `serve` and `studio`."""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.panel import Panel

from waypoint.agent_source import AgentSource
from waypoint.cli.options import (
    AgentPath,
    LLMChoice,
    LLMOption,
    ToolsOption,
    _choose_llm,
    _load,
    _step,
)
from waypoint.cli.program import _debugging, console

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


# Each credential's name in the file, its environment variable, and how a new one is made.
_SERVED_SECRETS = (
    ("management_api_key", "WAYPOINT_MANAGEMENT_API_KEY", secrets.token_urlsafe, 24),
    ("generic_secret", "WAYPOINT_GENERIC_SECRET", secrets.token_urlsafe, 24),
    ("secret_digest_key", "WAYPOINT_SECRET_DIGEST_KEY", secrets.token_hex, 32),
)


@dataclass(frozen=True)
class ServedSecrets:
    """The local stack's credentials, kept across restarts of `waypoint serve`."""

    management_api_key: str
    generic_secret: str
    secret_digest_key: str  # engine.privacy.digests: a new one forgets what sessions kept


def _served_secrets(data: Path | None) -> ServedSecrets:
    """The management API key, the generic channel secret and the secret-digest key: from the
    environment, else kept in the data directory (a restart must not invalidate the front
    end's configuration, nor the digests the sessions keep), else new."""
    import json

    stored: dict[str, str] = {}
    path = data / SECRETS_FILE if data is not None else None
    if path is not None and path.exists():
        stored = json.loads(path.read_text(encoding="utf-8"))
    chosen = {
        name: os.environ.get(env) or stored.get(name) or make(size)
        for name, env, make, size in _SERVED_SECRETS
    }
    if path is not None and any(name not in stored for name in chosen):
        # Readable by this user only: these are credentials of the local stack. A file from
        # before a credential existed gets it added; what it held stays.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the stack's data: 0700
        partial = path.with_name(path.name + ".new")
        partial.unlink(missing_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            json.dump({**chosen, **stored}, f)
        os.replace(partial, path)
    return ServedSecrets(**chosen)


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
    agent: Any, tools_module: str | None, host: str, port: int, served: ServedSecrets,
    data_dir: Path | None,
) -> Any:  # fmt: skip
    """The LocalServer `serve` and `studio` run (not started)."""
    from waypoint.local_server import LocalServer

    return LocalServer(
        agent,
        tools_module=tools_module,
        host=host,
        port=port,
        management_api_key=served.management_api_key,
        generic_secret=served.generic_secret,
        secret_digest_key=served.secret_digest_key,
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
    served = _served_secrets(data_dir)
    key, generic = served.management_api_key, served.generic_secret
    try:
        server = _local_server(agent, tools_module, host, port, served, data_dir)
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
