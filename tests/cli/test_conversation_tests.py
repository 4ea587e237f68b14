"""`waypoint test`: conversation tests run as a user runs them (typer's runner, the real engine,
the offline model, the example agents' own tools). Every expectation kind is made to fail once and
must say which turn, which expectation and what the turn showed instead — no traceback."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from examples.banking import AGENT_PATH as BANK_AGENT
from waypoint.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # set (not only deleted) so the provider `waypoint test` chooses is undone after each test
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "offline")
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the runner may add the working directory


def bank_test(tmp_path: Path, turns: str, name: str = "probe") -> Path:
    """A conversation test file against the banking concierge with these turns (YAML text)."""
    path = tmp_path / f"{name}.conv.yaml"
    path.write_text(
        f"name: {name}\nagent: {BANK_AGENT}\ntools: examples.banking.tools\n"
        f"setup: examples.banking.bank:reset_bank\nturns:\n{turns}"
    )
    return path


LOGGED_IN = """
  - customer: What is my balance?
  - customer: seldo
  - customer: monkey
"""


def test_waypoint_test_runs_the_example_suites_and_counts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    result = runner.invoke(app, ["test", "examples/"])

    assert result.exit_code == 0, result.output
    assert result.output.count("✓ examples/banking/tests/") == 5
    assert result.output.count("✓ examples/pizza/tests/order.conv.yaml :: ") == 3
    assert "8 passed, 0 failed" in result.output
    # the two judged expectations cannot run offline, and the output says why and how
    assert "2 judged expectation(s) skipped with the offline model" in result.output
    assert "set OPENAI_API_KEY" in result.output


def test_repeat_reports_pass_k_per_test_and_junit_xml_lists_every_test(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(REPO)
    junit = tmp_path / "reports" / "conversations.xml"

    result = runner.invoke(
        app, ["test", "examples/pizza", "--repeat", "3", "--junit-xml", str(junit)]
    )

    assert result.exit_code == 0, result.output
    assert result.output.count("[3/3 runs passed, pass^3 ✓]") == 3
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("3", "0")
    names = [case.get("name") for case in suite.iter("testcase")]
    assert "a no to the confirmation orders nothing" in names
    skipped = [case.findtext("system-out") for case in suite.iter("testcase")]
    assert any(note and "needs a real model" in note for note in skipped)


def test_a_failing_test_names_the_turn_the_expectation_and_what_was_seen(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "out.xml"
    path = bank_test(
        tmp_path,
        LOGGED_IN + "  - customer: Savings\n    expect: {reply_contains: '99999.00'}\n",
    )

    result = runner.invoke(app, ["test", str(path), "--junit-xml", str(junit)])

    assert result.exit_code == 1
    assert f"✗ {path} :: probe" in result.output
    assert "  turn 4 (customer: 'Savings')\n    expected: reply contains '99999.00'\n" in (
        result.output
    )
    assert (
        "    saw:      reply 'The balance of the account for Savings is 25000.00" in result.output
    )
    assert "Traceback" not in result.output
    assert "0 passed, 1 failed" in result.output
    failure = ET.parse(junit).getroot().find("testsuite/testcase/failure")
    assert failure is not None and "expected: reply contains '99999.00'" in (failure.text or "")


# Each expectation kind, made to fail at the fourth turn ("Savings", after logging in): the
# balance is looked up and told, the balance journey completes.
FAILING = [
    ("reply_contains: overdraft", "reply contains 'overdraft'", "reply 'The balance"),
    ("reply_not_contains: '25000'", "reply does not contain '25000'", "reply 'The balance"),
    ("reply_matches: '^Sorry'", "reply matches /^Sorry/", "reply 'The balance"),
    ("guideline_matched: greet", "guideline 'greet' matched", "matched guidelines none"),
    ("journey_step: {balance: ask_account}", "journey 'balance' at step 'ask_account'",
     "journey 'balance' not active"),
    ("journey_completed: transfer", "journey 'transfer' completed",
     "completed journeys ['authenticate', 'balance']"),
    ("tool_called: {tool: lookup_account_id, arguments: {account_name: Checking}}",
     "tool 'lookup_account_id' called with account_name='Checking'",
     "lookup_account_id(account_name='Savings') → ok"),
    ("tool_called: {tool: get_account_balance, status: error}",
     "tool 'get_account_balance' called with status 'error'", "get_account_balance(account_id="),
    ("tool_called: transfer_money", "tool 'transfer_money' called", "tool calls lookup_account_id("),
    ("no_tool_called: true", "no tool called", "tool calls lookup_account_id("),
    ("no_tool_called: [get_account_balance]", "tool 'get_account_balance' not called",
     "get_account_balance(account_id="),
    ("collected: {balance.account_name: Checking}", "collected balance.account_name = 'Checking'",
     "'account_name': 'Savings'"),
]  # fmt: skip


@pytest.mark.parametrize(("expect", "expected", "saw"), FAILING, ids=[f[0] for f in FAILING])
def test_each_expectation_kind_fails_with_what_it_saw(
    tmp_path: Path, expect: str, expected: str, saw: str
) -> None:
    path = bank_test(tmp_path, LOGGED_IN + f"  - customer: Savings\n    expect: {{{expect}}}\n")

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 1, result.output
    block = result.output.split("turn 4 (customer: 'Savings')\n", 1)[1]
    assert block.startswith(f"    expected: {expected}\n    saw:      "), result.output
    assert saw in block.splitlines()[1], result.output
    assert "Traceback" not in result.output


def test_guideline_not_matched_fails_when_it_matched(tmp_path: Path) -> None:
    path = bank_test(tmp_path, "  - customer: Hi\n    expect: {guideline_not_matched: greet}\n")

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 1
    assert (
        "expected: guideline 'greet' not matched\n    saw:      matched guidelines ['greet']"
        in (result.output)
    )


def test_a_run_stops_at_the_first_failing_turn(tmp_path: Path) -> None:
    path = bank_test(
        tmp_path,
        "  - customer: Hi\n    expect: {reply_contains: nope}\n"
        "  - customer: Transfer money\n    expect: {reply_contains: nope either}\n",
    )

    result = runner.invoke(app, ["test", str(path)])

    assert "turn 1 (customer: 'Hi')" in result.output
    assert "turn 2" not in result.output and "nope either" not in result.output


def test_a_judged_expectation_is_skipped_offline_with_a_note(tmp_path: Path) -> None:
    path = bank_test(tmp_path, "  - customer: Hi\n    expect: {judged: The reply is in French}\n")

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 0, result.output
    assert "skipped judged expectation, turn 1: The reply is in French" in result.output
    assert "1 judged expectation(s) skipped with the offline model" in result.output


def test_an_unknown_field_is_reported_with_its_file_and_place(tmp_path: Path) -> None:
    path = bank_test(tmp_path, "  - customer: Hi\n    expect: {reply_contain: hello}\n")

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 2
    assert f"✗ {path}: test 'probe': turns.0.expect.reply_contain: Extra inputs" in result.output
    assert "Traceback" not in result.output


def test_a_missing_path_and_an_empty_folder_say_so(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["test", str(tmp_path / "nowhere")])
    empty = runner.invoke(app, ["test", str(tmp_path)])

    assert missing.exit_code == 2 and "nowhere does not exist" in missing.output
    assert empty.exit_code == 2 and "no conversation tests (*.conv.yaml)" in empty.output


def test_a_tools_module_that_cannot_be_imported_fails_the_test_in_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.conv.yaml"
    path.write_text(
        f"agent: {BANK_AGENT}\ntools: no_such_tools_module\nturns: [{{customer: Hi}}]\n"
    )

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 1
    assert "tools='no_such_tools_module' cannot be imported: No module named" in result.output
    assert "Traceback" not in result.output


def test_a_tools_module_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_bank_tools.py").write_text("from examples.banking.tools import registry\n")
    path = tmp_path / "tests" / "hello.conv.yaml"
    path.parent.mkdir()
    path.write_text(
        f"agent: {BANK_AGENT}\ntools: my_bank_tools\n"
        "turns:\n  - customer: Hi\n    expect: {reply_contains: stock price}\n"
    )
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, ["test"])  # PATH defaults to the working directory

    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.output


def test_an_invalid_agent_names_its_problems(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text("agent: {id: shop, name: Shop}\nguidelines:\n  - {id: g}\n")
    path = tmp_path / "t.conv.yaml"
    path.write_text("agent: agent.yaml\nturns: [{customer: Hi}]\n")  # relative to the test file

    result = runner.invoke(app, ["test", str(path)])

    assert result.exit_code == 1
    assert f"agent {agent} is invalid (run `waypoint validate {agent}`)" in result.output


def _run_pytest(*args: str) -> Any:
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_pytest_plugin_collects_conversation_files(tmp_path: Path) -> None:
    passing = _run_pytest("examples/")

    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "8 passed" in passing.stdout
    assert "JudgedExpectationSkipped" in passing.stdout


def test_the_pytest_plugin_reports_a_failure_as_one_block(tmp_path: Path) -> None:
    path = bank_test(tmp_path, "  - customer: Hi\n    expect: {reply_contains: bonjour}\n")

    failing = _run_pytest(str(path), "--conv-repeat", "2")

    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "0/2 runs passed" in failing.stdout
    assert "turn 1 (customer: 'Hi')\n    expected: reply contains 'bonjour'" in failing.stdout
    assert "Traceback" not in failing.stdout and "conversation_tests.py" not in failing.stdout


def test_the_documented_transfer_example_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (REPO / "docs" / "conversation-tests.md").read_text()
    example = page.split("```yaml\n# tests/transfer.conv.yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "agent.yaml").write_text(BANK_AGENT.read_text())
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "transfer.conv.yaml").write_text(example)
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, ["test"])

    assert result.exit_code == 0, result.output
    assert "✓ tests/transfer.conv.yaml :: the transfer waits for login" in result.output
    assert "1 passed, 0 failed; 1 judged expectation(s) skipped" in result.output
