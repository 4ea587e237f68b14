"""`waypoint diff`, `waypoint rollback` and `waypoint publish --force`, run as a user runs them
(typer's runner, real local stack)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from engine.authoring import dump_agent
from examples.banking import AGENT_PATH
from infra.aws.local_stack import LocalStack
from infra.runtime import reset_runtime
from tests.engine.agent_versions import (
    changed_bank,
    greeting_changed,
    migrate,
    rename_step,
    rename_tool,
    without_journey,
)
from waypoint.cli import app

runner = CliRunner()
V1 = "450f8869958987f3"  # the banking example's content version


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("WAYPOINT_TOOL_FUNCTION", raising=False)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def agent_file(tmp_path: Path) -> Callable[..., Path]:
    def write(*changes: Callable[[dict[str, Any]], None], name: str = "new.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(dump_agent(changed_bank(*changes)), sort_keys=False))
        return path

    return write


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        reset_runtime()
        yield local
        reset_runtime()


def test_diff_lists_what_changes_between_two_agent_files(agent_file) -> None:
    new = agent_file(
        without_journey("stock"), rename_step("transfer", "ask_amount", "ask_sum"), greeting_changed
    )

    result = runner.invoke(app, ["diff", str(AGENT_PATH), str(new)])

    assert result.exit_code == 0, result.output
    assert f"agent bank: {V1} →" in result.output
    assert "journeys removed: stock" in result.output
    assert "guidelines changed: greet" in result.output
    assert "journey transfer: steps added ask_sum; steps removed ask_amount" in result.output


def test_diff_refuses_a_migration_of_steps_the_old_version_never_had(agent_file) -> None:
    new = agent_file(
        rename_step("transfer", "ask_amount", "ask_sum"),
        migrate("transfer", {"ask_amonut": "ask_sum"}),  # a typo: v1 has no such step
    )

    result = runner.invoke(app, ["diff", str(AGENT_PATH), str(new)])

    assert result.exit_code == 1
    assert "steps migrated ask_amonut → ask_sum" in result.output
    assert f"version {V1} has no step 'ask_amonut'" in result.output


def test_diff_with_a_tools_module_names_a_tool_the_registry_lacks(agent_file) -> None:
    new = agent_file(rename_tool("transfer_money", "send_money"))

    result = runner.invoke(
        app, ["diff", str(AGENT_PATH), str(new), "--tools", "examples.banking.tools"]
    )

    assert result.exit_code == 1
    assert "tools removed: transfer_money" in result.output
    assert "tool 'send_money' is not in the deployed tool registry" in result.output


def test_diff_reads_a_python_agent_file_as_chat_does(tmp_path: Path) -> None:
    new = tmp_path / "bank_in_python.py"
    new.write_text(
        "from examples.banking import load\n"
        "from examples.banking.tools import registry\n\n"
        "agent = load()\n"
    )

    result = runner.invoke(app, ["diff", str(AGENT_PATH), str(new)])

    assert result.exit_code == 0, result.output
    assert f"agent bank: {V1} → {V1}" in result.output
    assert "no changes" in result.output


def test_publish_refuses_a_tool_the_deployment_lacks_unless_forced(
    agent_file, stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAYPOINT_TOOLS_MODULE", "examples.banking.tools")
    assert runner.invoke(app, ["publish", str(AGENT_PATH)]).exit_code == 0
    reset_runtime()
    new = agent_file(rename_tool("transfer_money", "send_money"))

    refused = runner.invoke(app, ["publish", str(new)])
    reset_runtime()
    forced = runner.invoke(app, ["publish", str(new), "--force"])

    assert refused.exit_code == 1, refused.output
    assert "✗ tool 'send_money' is not in the deployed tool registry" in refused.output
    assert "not published" in refused.output and "--force" in refused.output
    assert forced.exit_code == 0, forced.output
    assert "published with --force despite the problems above" in forced.output


def test_publish_without_a_known_registry_says_tools_were_not_checked(stack) -> None:
    result = runner.invoke(app, ["publish", str(AGENT_PATH)])

    assert result.exit_code == 0, result.output
    assert "tools not checked: set WAYPOINT_TOOL_FUNCTION" in result.output


def test_rollback_flips_back_to_the_previous_version_or_the_one_named(agent_file, stack) -> None:
    assert runner.invoke(app, ["publish", str(AGENT_PATH)]).exit_code == 0
    reset_runtime()
    new = agent_file(greeting_changed)
    assert runner.invoke(app, ["publish", str(new)]).exit_code == 0
    reset_runtime()
    v2 = changed_bank(greeting_changed).version

    back = runner.invoke(app, ["rollback", "bank"])
    reset_runtime()
    forward = runner.invoke(app, ["rollback", "bank", v2])
    reset_runtime()
    unknown = runner.invoke(app, ["rollback", "bank", "nosuchversion"])

    assert back.exit_code == 0, back.output
    assert f"rolled back agent 'bank': {v2} → {V1}" in back.output
    assert forward.exit_code == 0 and f"{V1} → {v2}" in forward.output
    assert unknown.exit_code == 1 and "has no version 'nosuchversion'" in unknown.output
    assert V1 in unknown.output  # the stored versions are listed


def test_publish_dry_run_shows_the_check_and_writes_nothing(
    agent_file, stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAYPOINT_TOOLS_MODULE", "examples.banking.tools")
    assert runner.invoke(app, ["publish", str(AGENT_PATH)]).exit_code == 0
    reset_runtime()
    new = agent_file(rename_tool("transfer_money", "send_money"))

    dry = runner.invoke(app, ["publish", str(new), "--dry-run"])
    reset_runtime()
    fine = runner.invoke(app, ["publish", str(agent_file(greeting_changed)), "--dry-run"])
    reset_runtime()
    back = runner.invoke(app, ["rollback", "bank"])

    assert dry.exit_code == 1 and "would be refused; nothing was written" in dry.output
    assert "tools removed: transfer_money" in dry.output
    assert fine.exit_code == 0 and "would publish; nothing was written" in fine.output
    assert back.exit_code == 1  # still only one version was ever published
    assert "no earlier published version" in back.output
