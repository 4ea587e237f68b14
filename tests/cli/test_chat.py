"""`waypoint chat`: commands, the stage spinner, no overall time limit, failing and dead workers,
text that looks like markup, and a tools module in the user's own folder (waypoint/chat.py)."""

from __future__ import annotations

import shutil
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.banking import bank
from infra.runtime import current_runtime, reset_runtime
from tests.cli.chat_kit import ROOT, Lines, offline, recording_console, run_cli  # noqa: F401 (offline: an autouse fixture)
from waypoint.agent_source import AgentSource
from waypoint.chat import Chat, WorkerStopped
from waypoint.local_server import LocalServer

PIZZA = ROOT / "examples" / "pizza"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A user's folder: the pizza agent and its tools as `pizza_tools.py`, beside each other."""
    shutil.copy(PIZZA / "agent.yaml", tmp_path / "agent.yaml")
    shutil.copy(PIZZA / "tools.py", tmp_path / "pizza_tools.py")
    return tmp_path


def _chat(source: AgentSource, **kwargs: Any) -> Iterator[tuple[Chat, Any]]:
    bank.reset_bank()
    agent, tools = source.load()
    console, out = recording_console()
    with LocalServer(agent, tools_module=tools) as server:
        chat = Chat(server, source, console, **kwargs)
        try:
            yield chat, out
        finally:
            chat.close()
    reset_runtime()


@pytest.fixture
def concierge() -> Iterator[tuple[Chat, Any]]:
    yield from _chat(AgentSource(None))


# ---- a tools module in the user's folder (subprocess, as typed in a shell)


def test_a_tools_module_beside_the_agent_imports_from_the_working_directory(folder: Path) -> None:
    result = run_cli("chat", "agent.yaml", "--tools", "pizza_tools", cwd=folder, stdin="Hi\n")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "agent › Hi! I can take a pizza order" in result.stdout


def test_a_tools_module_that_fails_to_import_says_why_in_one_line(folder: Path) -> None:
    (folder / "pizza_tools.py").write_text("import pizza_oven_driver\n")

    started = time.monotonic()
    result = run_cli("chat", "agent.yaml", "--tools", "pizza_tools", cwd=folder, stdin="Hi\n")

    assert result.returncode == 2
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    assert "No module named 'pizza_oven_driver'" in lines[0] and "pizza_tools.py:1" in lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    assert time.monotonic() - started < 60  # told at once, not after a turn's timeout


def test_chat_prints_text_in_brackets_as_written_and_no_spinner_off_a_terminal(
    folder: Path,
) -> None:
    agent = (folder / "agent.yaml").read_text()
    (folder / "agent.yaml").write_text(
        agent.replace(
            '"Hi! I can take a pizza order', '"[small] or [large]? Hi! I can take a pizza order'
        )
    )

    result = run_cli("chat", "agent.yaml", "--tools", "pizza_tools", cwd=folder, stdin="Hi\n")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "[small] or [large]? Hi! I can take a pizza order" in result.stdout
    for spinner_text in ("queued", "matching guidelines", "composing the reply"):
        assert spinner_text not in result.stdout  # the spinner draws on a terminal only


def test_chat_shows_offered_options_with_their_ids(concierge: tuple[Chat, Any]) -> None:
    chat, out = concierge
    chat.show_reply({"text": "Pick a size", "options": [{"id": "small", "label": "[S] Small"}]})
    assert "   [small] [S] Small" in out.getvalue()


# ---- commands


def test_state_shows_journeys_and_collected_values_with_declared_secrets_masked(
    concierge: tuple[Chat, Any],
) -> None:
    chat, out = concierge
    chat.run(Lines("Transfer money", "seldo", "monkey", "/state", "/quit"))

    shown = out.getvalue()
    assert "journey Authentication: completed" in shown
    assert "collected Authentication.username = seldo" in shown
    assert "collected Authentication.password = •••" in shown
    assert "monkey" not in shown.split("/state")[-1].split("you ›")[0]
    assert "journey Money transfer: waiting for a prerequisite" in shown


def test_trace_explains_the_last_turn_by_titles(concierge: tuple[Chat, Any]) -> None:
    chat, out = concierge
    chat.run(Lines("Transfer money", "/trace"))

    shown = out.getvalue()
    assert "✓ matched start of Money transfer" in shown
    assert "reason:" in shown and "llm round 1: match_guidelines" in shown
    assert "journey Authentication: entered → ask_username" in shown
    assert "journey:transfer:condition" not in shown


def test_reset_starts_a_new_session(concierge: tuple[Chat, Any]) -> None:
    chat, out = concierge
    first = chat.client.session_id
    chat.run(Lines("Transfer money", "/reset", "/state"))

    assert chat.client.session_id != first
    assert "no session yet" in out.getvalue()


def test_reload_publishes_the_edited_agent_and_tools_and_keeps_going(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    agent_file = folder / "agent.yaml"

    def edit() -> None:
        agent_file.write_text(
            agent_file.read_text().replace(
                '"Hi! I can take a pizza order', '"Welcome back! I can take a pizza order'
            )
        )

    def break_it() -> None:
        agent_file.write_text(agent_file.read_text().replace("to: ask_pin", "to: nowhere", 1))

    for chat, out in _chat(AgentSource("agent.yaml", "pizza_tools")):
        before = chat.server.agent.version
        chat.run(Lines("Hi", edit, "/reload", "Hi", break_it, "/reload", "Hi", "/quit"))
        shown = out.getvalue()
        assert "agent › Hi! I can take a pizza order" in shown
        assert "✓ reloaded agent.yaml: agent 'pizza' version" in shown
        assert "Welcome back! I can take a pizza order" in shown
        assert chat.server.agent.version != before
        # a broken edit is reported and the previous version keeps answering
        assert "still running the previous version" in shown and "nowhere" in shown
        assert shown.count("Welcome back! I can take") == 2
    import sys

    sys.modules.pop("pizza_tools", None)


def test_unknown_command_and_help(concierge: tuple[Chat, Any]) -> None:
    chat, out = concierge
    chat.run(Lines("/frobnicate", "/help", "/quit"))
    shown = out.getvalue()
    assert "unknown command /frobnicate: /help lists them" in shown
    for command in ("/reset", "/state", "/trace", "/reload", "/quit"):
        assert command in shown


# ---- slow, failing and dead workers


class SlowLLM:
    """The model, taking its time on the reply: a turn longer than any fixed chat timeout."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds

    async def generate(self, prompt: str, schema: type[Any], *, model: str) -> Any:
        import asyncio

        if schema.__name__ == "ComposedReply":
            await asyncio.sleep(self.seconds)
        return await self.inner.generate(prompt, schema, model=model)


def _replace_llm(chat: Chat, llm: Any) -> None:
    runtime = current_runtime()
    runtime.__dict__["llm"] = llm
    runtime.__dict__.pop("engine", None)
    chat.server._instrument(runtime)


def test_a_slow_turn_shows_its_stage_and_is_waited_for_without_a_time_limit(
    concierge: tuple[Chat, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    chat, _ = concierge
    _replace_llm(chat, SlowLLM(current_runtime().llm, seconds=1.5))
    # A terminal, so the spinner draws; and a clock that races: a chat that gave up after a
    # fixed time would give up here.
    import io

    terminal = io.StringIO()
    chat.console = Console(file=terminal, force_terminal=True, width=200)
    real = time.monotonic
    started = real()
    # The chat's own clock only: `time.monotonic` itself also times the HTTP client's connects
    # and the worker's leases in this process, and racing those made the reply's delivery time
    # out on a loaded machine, so the turn was never answered.
    racing = types.SimpleNamespace(
        **{name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    )
    racing.monotonic = lambda: started + (real() - started) * 1000
    monkeypatch.setattr("waypoint.chat.time", racing)

    reply = chat.turn("Hi")

    assert reply is not None and reply["text"].startswith("Hi! I can look up a stock price")
    drawn = terminal.getvalue()
    assert "composing the reply" in drawn  # the stage the turn was waiting on


def test_a_turn_that_keeps_failing_is_given_up_in_one_line(concierge: tuple[Chat, Any]) -> None:
    class BrokenLLM:
        async def generate(self, prompt: str, schema: type[Any], *, model: str) -> Any:
            raise RuntimeError("model endpoint refused the connection")

    chat, out = concierge
    _replace_llm(chat, BrokenLLM())

    started = time.monotonic()
    reply = chat.turn("Hi")

    assert reply is None
    shown = out.getvalue()
    assert "✗ the turn failed 3 times: RuntimeError: model endpoint refused the connection" in shown
    assert "/reload" in shown and "Traceback" not in shown
    assert time.monotonic() - started < 30


def test_a_dead_worker_ends_the_wait_with_one_line(concierge: tuple[Chat, Any]) -> None:
    chat, _ = concierge
    assert chat.server.poller is not None
    chat.server.poller.stop()
    chat.server.poller.join(timeout=10)

    with pytest.raises(WorkerStopped, match="the local turn worker stopped"):
        chat.turn("Hi")


def test_ctrl_c_stops_waiting_and_the_late_reply_is_shown_next(
    concierge: tuple[Chat, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    chat, out = concierge
    _replace_llm(chat, SlowLLM(current_runtime().llm, seconds=1.0))
    polls = iter([KeyboardInterrupt()])

    original = chat.server.replies.poll

    def interrupted(conversation_id: str, timeout: float) -> Any:
        failure = next(polls, None)
        if failure is not None:
            raise failure
        return original(conversation_id, timeout)

    monkeypatch.setattr(chat.server.replies, "poll", interrupted)
    assert chat.turn("Hi") is None
    assert "stopped waiting" in out.getvalue()

    time.sleep(3)  # the turn finishes in the background
    chat.run(Lines("/quit"))
    assert "(late) agent › Hi! I can look up a stock price" in out.getvalue()


def test_trace_and_state_mask_declared_secrets_only_not_names_that_look_secret(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toppings` contains "pin" and used to be masked; only declared secrets are (here the
    pizza agent's PIN is declared secret, as an author would)."""
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    agent_file = folder / "agent.yaml"
    agent_file.write_text(
        agent_file.read_text().replace("collects: {pin: str}", "collects: {pin: secret}")
    )

    for chat, out in _chat(AgentSource("agent.yaml", "pizza_tools")):
        chat.run(
            Lines("I want to log in", "555-0100", "4321", "I want to order a pizza", "small",
                  "pepperoni and mushrooms", "/trace", "/state", "/quit")
        )  # fmt: skip
        shown = out.getvalue()
        assert "collected Pizza order.toppings = pepperoni and mushrooms" in shown, shown
        assert "collected Login.pin = •••" in shown
        assert "4321" not in shown  # neither in a reply, the trace nor the state
    import sys

    sys.modules.pop("pizza_tools", None)


def test_a_worker_invocation_that_fails_whole_is_told_like_a_failed_turn(
    concierge: tuple[Chat, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    from functions import worker

    def crash(event: Any, context: Any) -> Any:
        raise RuntimeError("the worker lost its database connection")

    monkeypatch.setattr(worker, "handler", crash)
    monkeypatch.setattr(logging.getLogger("waypoint.local"), "level", logging.CRITICAL)
    chat, out = concierge

    assert chat.turn("Hi") is None
    assert (
        "✗ the turn failed 3 times: RuntimeError: the worker lost its database connection"
        in out.getvalue()
    )


def test_typing_an_offered_option_picks_it() -> None:
    from waypoint.chat import _chosen

    offered = [{"id": "1", "label": "small"}, {"id": "2", "label": "Large"}]
    assert _chosen(offered, "small") == "1"
    assert _chosen(offered, "[2]") == "2"
    assert _chosen(offered, "large") == "2"
    assert _chosen(offered, "a small one please") is None  # words go to the model as words
