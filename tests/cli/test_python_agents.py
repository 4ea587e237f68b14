"""A Python-built agent runs with `chat`, `serve`, `publish` and `validate` like a YAML one; the
agent argument's every failure is one line naming what to fix (waypoint/agent_source.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.runtime import reset_runtime
from tests.cli.chat_kit import run_cli
from waypoint.agent_source import AgentProblems, AgentSource, CliProblem
from waypoint.cli import app

runner = CliRunner()

HOURS_AGENT = """
from engine.authoring import Agent
from engine.toolkit import ToolResult, tool


@tool(description="Tell the shop's opening hours")
def opening_hours() -> ToolResult:
    return ToolResult(data={"hours": "9 to 5, Monday to Friday"})


TOOLS = [opening_hours]  # this module is also the agent's tools module

agent = Agent(id="hours", name="Opening hours")
agent.create_guideline(
    condition="The customer greets the agent", action='Say "Hello from a Python agent!"'
)
agent.create_guideline(
    condition="The customer asks when the shop is open",
    action="Tell the customer the opening hours",
    tools=[opening_hours.tool_spec],
)
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's own project folder, with `hours_agent.py` in it, as the working directory."""
    (tmp_path / "hours_agent.py").write_text(HOURS_AGENT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / ".cache"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:  # this folder's modules: another test has its own
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(tmp_path)):
            del sys.modules[name]


def test_a_python_agent_file_chats_with_the_tools_it_defines(folder: Path) -> None:
    result = run_cli(
        "chat", "hours_agent.py", cwd=folder, stdin="Hi\nWhen is the shop open?\n/state\n"
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "agent › Hello from a Python agent!" in result.stdout
    assert "9 to 5, Monday to Friday" in result.stdout  # its own @tool ran
    assert "Traceback" not in result.stdout + result.stderr


def test_a_module_attribute_and_a_build_function_are_agents_too(folder: Path) -> None:
    (folder / "factory.py").write_text(
        "from hours_agent import TOOLS, agent as _builder\n\n"
        "def build():\n    return _builder.build()\n\n"
        "named = _builder\n"
    )
    by_build, tools = AgentSource("factory.py").load()
    assert by_build.id == "hours" and tools == "factory"  # it re-exports TOOLS: its own tools
    by_name, _ = AgentSource("factory:named").load()
    assert by_name.version == by_build.version

    validated = runner.invoke(app, ["validate", "hours_agent:agent"])
    assert validated.exit_code == 0, validated.output
    assert "agent 'hours'" in validated.output and "1 tools" in validated.output


def test_a_python_agent_publishes_to_the_stack(folder: Path) -> None:
    from infra.aws.local_stack import LocalStack

    with LocalStack():
        reset_runtime()
        published = runner.invoke(app, ["publish", "hours_agent.py"])
        reset_runtime()
    assert published.exit_code == 0, published.output
    assert "published agent 'hours'" in published.output


def test_serve_runs_a_python_agent(folder: Path) -> None:
    from tests.cli.chat_kit import serve_banner

    seen = serve_banner(
        "hours_agent.py", "--port", "0", "--ephemeral", "--llm", "offline", cwd=folder
    )
    assert "Waypoint serving agent 'hours'" in seen, seen


@pytest.mark.parametrize(
    ("spec", "source", "says"),
    [
        ("nothing_here.py", None, "nothing_here.py does not exist"),
        ("no_such_module:agent", None, "no module named 'no_such_module'"),
        ("empty.py", "x = 1\n", "defines no `agent` (or a `build()` function)"),
        ("wrong.py", "agent = 42\n", "`agent` is a int; it must be an Agent"),
        ("crash.py", "import json\nagent = json.loads('{')\n", "JSONDecodeError"),
        ("syntax.py", "agent = (\n", "SyntaxError"),
        ("agent.txt", "", "an agent is a .yaml/.yml/.json document, a .py file"),
    ],
)
def test_every_bad_agent_argument_is_one_line(
    folder: Path, spec: str, source: str | None, says: str
) -> None:
    if source is not None:
        (folder / spec).write_text(source)

    with pytest.raises(CliProblem, match=None) as raised:
        AgentSource(spec).load()
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)

    result = runner.invoke(app, ["validate", spec])
    assert result.exit_code in (1, 2)
    assert says.split("'")[0].split("`")[0] in result.output
    assert "Traceback" not in result.output


def test_a_python_agent_with_problems_lists_them_all(folder: Path) -> None:
    (folder / "broken.py").write_text(
        "from engine.authoring import Agent\n"
        "agent = Agent(id='b', name='B')\n"
        "agent.create_guideline(condition='Hi', action='Call it', tools=['missing_tool'])\n"
    )
    with pytest.raises(AgentProblems) as raised:
        AgentSource("broken.py").load()
    assert any("missing_tool" in p for p in raised.value.problems)


def test_debug_shows_the_traceback_of_a_failing_agent_module(folder: Path) -> None:
    (folder / "crash.py").write_text("def build():\n    raise ValueError('no config file')\n")

    quiet = runner.invoke(app, ["validate", "crash.py"])
    loud = run_cli("--debug", "validate", "crash.py", cwd=folder)

    assert quiet.exit_code == 2 and "Traceback" not in quiet.output
    assert "ValueError: no config file" in quiet.output
    assert loud.returncode == 2 and "Traceback" in loud.stdout, loud.stdout + loud.stderr


def test_a_python_agent_whose_tools_nothing_runs_says_what_to_expose(folder: Path) -> None:
    (folder / "no_registry.py").write_text(HOURS_AGENT.replace("TOOLS = [opening_hours]", ""))

    with pytest.raises(CliProblem) as raised:
        AgentSource("no_registry.py").load()

    assert "calls tools (opening_hours) but nothing runs them" in str(raised.value)
    assert "--tools" in str(raised.value)
    agent, tools = AgentSource("no_registry.py", "hours_agent").load()  # its tools elsewhere
    assert tools == "hours_agent" and agent.id == "hours"
