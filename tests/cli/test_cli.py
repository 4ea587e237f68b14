"""The `waypoint` command line, run as a user runs it (typer's runner, real local stack)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from examples.banking import AGENT_PATH
from infra.runtime import reset_runtime
from waypoint.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping in assertions


def test_validate_accepts_the_banking_agent() -> None:
    result = runner.invoke(app, ["validate", str(AGENT_PATH)])
    assert result.exit_code == 0, result.output
    assert "agent 'bank'" in result.output and "4 journeys" in result.output


def test_validate_names_every_problem(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        """
agent: {id: shop, name: Shop}
journeys:
  - id: refund
    title: Refund
    conditions: [The customer wants a refund]
    states:
      - {id: ask, chat: Ask for the order number}
      - {id: pay, tool: refund_money}
    transitions:
      - {from: root, to: ask}
      - {from: ask, to: pay}
      - {from: pay, to: nowhere}
"""
    )
    result = runner.invoke(app, ["validate", str(broken)])
    assert result.exit_code == 1
    assert "refund_money" in result.output and "nowhere" in result.output


ROUTED = """
agent:
  id: routed
  name: Routed
  config:
    default_model: bedrock:anthropic.claude-3-5-haiku-20241022-v1:0
    models:
{models}
guidelines:
  - {{id: hi, condition: The customer says hello, action: Greet them}}
"""


def test_validate_checks_the_model_routing_naming_each_offending_setting(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        ROUTED.format(
            models="      match_guidelines: bedrock:amazon.nova-micro-v1:0\n"
            "      compose: openai:gpt-4o-mini\n"
        )
    )
    valid = runner.invoke(app, ["validate", str(agent)])
    assert valid.exit_code == 0, valid.output
    assert (  # what template.yaml must grant: the models the agent routes to Bedrock
        "deploy with BedrockModelIds=anthropic.claude-3-5-haiku-20241022-v1:0,"
        "amazon.nova-micro-v1:0 (template.yaml" in " ".join(valid.output.split())
    )

    agent.write_text(
        ROUTED.format(
            models="      compose: bedrok:anthropic.claude-3-5-sonnet-20240620-v1:0\n"
            "      call_tools: 'bedrock:Claude Haiku'\n"
            "      select_journey_node: 'bedrock:'\n"
        )
    )
    result = runner.invoke(app, ["validate", str(agent)])
    assert result.exit_code == 1
    shown = " ".join(result.output.split())  # the console wraps long lines
    assert "agent.config.models.compose: unknown provider 'bedrok'" in shown
    assert "did you mean 'bedrock:'?" in shown
    assert "agent.config.models.call_tools: 'bedrock:Claude Haiku' contains spaces" in shown
    assert "agent.config.models.select_journey_node: 'bedrock:' names no model" in shown

    agent.write_text(ROUTED.format(models="      matching: gpt-4o-mini\n"))
    result = runner.invoke(app, ["validate", str(agent)])
    assert result.exit_code == 1
    assert "agent.config.models.matching: input should be 'match_guidelines'" in " ".join(
        result.output.split()
    )


def test_demo_prints_the_transcript_and_one_transfer() -> None:
    result = runner.invoke(app, ["demo"])
    reset_runtime()
    assert result.exit_code == 0, result.output
    assert "customer › Transfer money" in result.output
    assert "Could you tell me your password?" in result.output
    assert "tool transfer_money(account_id=1234567890, to_account_id=1234324" in result.output
    assert "✓ exactly one transfer: $500.00 from 1234567890 to 1234324" in result.output


def test_chat_answers_typed_messages_with_a_trace() -> None:
    result = runner.invoke(app, ["chat", "--trace"], input="Hi\nI want to log in\n")
    reset_runtime()
    assert result.exit_code == 0, result.output
    assert "agent › Hi! I can look up a stock price" in result.output
    assert "journey Authentication: moved → ask_username" in result.output
    # each turn's cost, from the price table: the offline model has no per-token price
    costs = re.findall(r"^.*llm: \d+ calls in \d+ rounds, .* cached\) \+ .*$", result.output, re.M)
    assert len(costs) == 2 and all(line.endswith(", $0.00000") for line in costs)


def test_publish_writes_the_agent_and_its_embeddings_to_the_stack() -> None:
    from infra.aws.local_stack import LocalStack

    with LocalStack():
        reset_runtime()
        result = runner.invoke(app, ["publish", str(AGENT_PATH)])
        reset_runtime()
    assert result.exit_code == 0, result.output
    assert "published agent 'bank'" in result.output and "journeys: 4" in result.output


def test_publish_without_a_stack_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WAYPOINT_TABLE", "WAYPOINT_BUCKET", "WAYPOINT_AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    reset_runtime()
    result = runner.invoke(app, ["publish", str(AGENT_PATH)])
    reset_runtime()
    assert result.exit_code == 2
    assert "WAYPOINT_" in result.output


def test_validate_checks_the_tools_against_their_registry(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["validate", str(AGENT_PATH), "--tools", "examples.banking.tools"])
    assert ok.exit_code == 0, ok.output
    differs = tmp_path / "agent.yaml"
    differs.write_text(
        AGENT_PATH.read_text().replace("consequential: true", "consequential: false", 1)
    )
    result = runner.invoke(app, ["validate", str(differs), "--tools", "examples.banking.tools"])
    assert result.exit_code == 1
    assert "tools[transfer_money]: the declaration differs from its @tool function" in result.output
    assert "consequential is False here but True in @tool" in result.output


def test_schema_prints_the_committed_schema() -> None:
    result = runner.invoke(app, ["schema"])
    committed = Path(__file__).resolve().parents[2] / "docs" / "agent.schema.json"
    assert result.exit_code == 0 and result.stdout == committed.read_text()


PIZZA = Path(__file__).resolve().parents[2] / "examples" / "pizza" / "agent.yaml"


def test_an_agent_that_names_its_tools_only_chats_and_publishes_with_its_tools_module() -> None:
    from infra.aws.local_stack import LocalStack

    chatted = runner.invoke(
        app, ["chat", str(PIZZA), "--tools", "examples.pizza.tools"], input="Hi\n"
    )
    reset_runtime()
    assert chatted.exit_code == 0, chatted.output
    assert "agent ›" in chatted.output

    with LocalStack():
        reset_runtime()
        published = runner.invoke(app, ["publish", str(PIZZA), "--tools", "examples.pizza.tools"])
        reset_runtime()
    assert published.exit_code == 0, published.output
    assert "published agent 'pizza'" in published.output


def test_without_its_tools_module_a_name_only_agent_says_what_to_pass() -> None:
    result = runner.invoke(app, ["chat", str(PIZZA)], input="Hi\n")
    reset_runtime()
    assert result.exit_code == 1
    assert "--tools" in result.output and "Traceback" not in result.output


def test_chat_with_a_missing_agent_file_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["chat", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "Traceback" not in result.output


def test_demo_verbose_shows_the_full_trace_by_titles_with_the_password_masked() -> None:
    brief = runner.invoke(app, ["demo"])
    reset_runtime()
    verbose = runner.invoke(app, ["demo", "--verbose"])
    reset_runtime()

    assert verbose.exit_code == 0, verbose.output
    shown = verbose.output
    assert len(shown.splitlines()) > 2 * len(brief.output.splitlines())
    assert "✓ matched start of Money transfer [" in shown  # guidelines, with the model's reason
    assert "✗ not matched" in shown and "    reason: " in shown
    assert "journey Money transfer: paused for a prerequisite" in shown  # transitions
    assert "journey Authentication: entered → ask_username (path: ask_username)" in shown
    assert "    step: Ask for the username" in shown or "    step: " in shown
    assert "tool transfer_money(account_id=1234567890, to_account_id=1234324" in shown
    assert "    grounded: " in shown  # where each argument came from
    assert "llm round 1: match_guidelines" in shown  # every LLM call
    assert "stages: load " in shown
    assert "journey:" not in shown  # titles, never internal ids
    # the declared secret is masked everywhere but in what the customer typed
    assert [line for line in shown.splitlines() if "monkey" in line] == ["customer › monkey"]
    assert "password=•••" in shown


def test_a_failure_nobody_planned_for_is_one_line_and_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import waypoint.cli.running as running  # where `demo` looks `_choose_llm` up

    def explode(choice: object) -> str:
        raise KeyError("provider")

    monkeypatch.setattr(running, "_choose_llm", explode)
    monkeypatch.setenv("WAYPOINT_DEBUG", "")  # --debug sets it; restored (unset) afterwards
    quiet = runner.invoke(app, ["demo"])
    assert quiet.exit_code == 1
    assert "✗ KeyError: 'provider'" in quiet.output
    assert "Run again with --debug for the traceback." in quiet.output
    assert "Traceback" not in quiet.output

    loud = runner.invoke(app, ["--debug", "demo"])
    assert isinstance(loud.exception, KeyError)  # raised: the traceback is printed


def test_a_usage_error_is_clicks_own_message() -> None:
    result = runner.invoke(app, ["chat", "--bogus"])
    assert result.exit_code == 2
    assert "No such option: --bogus" in result.output and "--debug" not in result.output
