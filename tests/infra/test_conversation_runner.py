"""The conversation test runner's Python form, and judged expectations with a model that can
judge: the agent runs on the offline model, the judge's question goes to a scripted judge that
records what it was asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.conversations.checks import JudgedReply
from engine.conversations.spec import ConversationTest, Expectation, ToolCallExpectation, Turn
from engine.ports import Generation
from engine.testing import ScriptedLLM
from examples.banking import AGENT_PATH, TOOLS_MODULE
from infra.conversation_tests import ConversationTestFailed, Models, run_conversation
from infra.embeddings import HashingEmbedder
from infra.offline import OfflineLLM


class AgentWithJudge:
    """The offline model for the agent's own calls; the judge's schema goes to `judge`."""

    def __init__(self, judge: ScriptedLLM) -> None:
        self.agent, self.judge = OfflineLLM(), judge

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        if schema is JudgedReply:
            return await self.judge.generate(prompt, schema, model=model)
        return await self.agent.generate(prompt, schema, model=model)


def greeting(expect: Expectation) -> ConversationTest:
    return ConversationTest(
        name="greets",
        agent=AGENT_PATH,
        tools=TOOLS_MODULE,
        setup="examples.banking.bank:reset_bank",
        turns=[Turn(customer="Hi", expect=expect)],
    )


def models(judge: ScriptedLLM) -> Models:
    return Models(AgentWithJudge(judge), HashingEmbedder(), real=True)


def test_the_python_form_runs_and_passes() -> None:
    test = ConversationTest(
        name="balance",
        agent=AGENT_PATH,
        tools=TOOLS_MODULE,
        setup="examples.banking.bank:reset_bank",
        turns=[
            Turn(customer="What is my balance?"),
            Turn(customer="seldo"),
            Turn(customer="monkey"),
            Turn(
                customer="Savings",
                expect=Expectation(
                    reply_contains=["25000.00"],
                    tool_called=[ToolCallExpectation(tool="get_account_balance")],
                ),
            ),
        ],
    )

    result = run_conversation(test, Models(OfflineLLM(), HashingEmbedder(), real=False))

    assert result.passed, result.describe_failure()
    result.raise_for_failure()  # no exception


def test_the_python_form_raises_the_failure_block() -> None:
    result = run_conversation(
        greeting(Expectation(reply_contains=["bonjour"])),
        Models(OfflineLLM(), HashingEmbedder(), real=False),
    )

    with pytest.raises(ConversationTestFailed) as raised:
        result.raise_for_failure()
    assert "turn 1 (customer: 'Hi')\n    expected: reply contains 'bonjour'" in str(raised.value)


def test_a_judged_expectation_the_judge_rejects_fails_with_its_reason() -> None:
    judge = ScriptedLLM().on(JudgedReply, {"satisfied": False, "reason": "the reply is in English"})

    result = run_conversation(greeting(Expectation(judged="The reply is in French")), models(judge))

    assert result.failure is not None
    [unmet] = result.failure.unmet
    assert unmet.expected == "judged: The reply is in French"
    assert unmet.saw.startswith("reply 'Hi! I can look up a stock price")
    assert unmet.saw.endswith("— judge: the reply is in English")
    [asked] = judge.calls
    assert "customer: Hi" in asked.prompt and "The reply is in French" in asked.prompt
    assert result.skipped_judgements == []


def test_a_judged_expectation_the_judge_accepts_passes() -> None:
    judge = ScriptedLLM().on(JudgedReply, {"satisfied": True, "reason": "it offers a transfer"})

    result = run_conversation(
        greeting(Expectation(judged="The reply offers to transfer money")), models(judge)
    )

    assert result.passed and result.skipped_judgements == []
    assert len(judge.calls) == 1


def test_a_turn_that_raises_is_reported_with_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(OfflineLLM):
        async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
            raise RuntimeError("the model is down")

    result = run_conversation(
        greeting(Expectation()), Models(Broken(), HashingEmbedder(), real=False)
    )

    assert not result.passed
    assert result.error is not None and result.error.startswith("turn 1 (customer: 'Hi') raised")


def test_a_setup_that_is_not_module_colon_function_is_named() -> None:
    test = greeting(Expectation()).model_copy(update={"setup": "examples.banking.bank.reset_bank"})

    result = run_conversation(test, Models(OfflineLLM(), HashingEmbedder(), real=False))

    assert result.error is not None and "must be `module:function`" in result.error


def test_relative_agent_paths_resolve_from_the_test_file(tmp_path: Path) -> None:
    from infra.conversation_tests import load_file

    (tmp_path / "suite").mkdir()
    path = tmp_path / "suite" / "t.conv.yaml"
    path.write_text("agent: ../agent.yaml\nturns: [{customer: Hi}]\n")

    [test] = load_file(path)

    assert test.agent == tmp_path / "suite" / ".." / "agent.yaml"
    assert test.name == "t" and test.source == path


def test_the_judge_through_the_openai_client_across_repeated_runs() -> None:
    """The judge through the real `openai` client against a local fake server: each run of a
    repeated test asks it again, and one rejection fails only that run."""
    from infra.conversation_tests import run_tests
    from infra.llm.openai_llm import OpenAISchematicLLM
    from tests.fakes.openai_server import FakeOpenAIServer, Reply

    with FakeOpenAIServer() as server:
        server.queue_chat(
            Reply({"satisfied": True, "reason": "it greets"}),
            Reply({"satisfied": False, "reason": "no French in it"}),
        )
        judge = OpenAISchematicLLM(api_key="test", base_url=server.base_url)

        class OfflineAgentOpenAIJudge(AgentWithJudge):
            async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
                if schema is JudgedReply:
                    return await judge.generate(prompt, schema, model=model)
                return await self.agent.generate(prompt, schema, model=model)

        models = Models(OfflineAgentOpenAIJudge(ScriptedLLM()), HashingEmbedder(), real=True)
        [outcome] = run_tests(
            [greeting(Expectation(judged="The reply greets"))], repeat=2, models=models
        )

    assert [run.passed for run in outcome.runs] == [True, False]
    assert outcome.runs[1].failure is not None
    assert outcome.runs[1].failure.unmet[0].saw.endswith("judge: no French in it")
    assert len(server.chat_requests) == 2


def test_the_judge_is_never_shown_a_secret_the_customer_typed() -> None:
    """The judge reads the conversation as the agent's store keeps it: the password typed in an
    earlier turn (declared secret in the banking agent) is masked in the judge's prompt, as in
    every later prompt of the agent's own."""
    judge = ScriptedLLM().on(JudgedReply, {"satisfied": True, "reason": "it asks for an account"})
    test = ConversationTest(
        name="balance",
        agent=AGENT_PATH,
        tools=TOOLS_MODULE,
        setup="examples.banking.bank:reset_bank",
        turns=[
            Turn(customer="What is my balance?"),
            Turn(customer="seldo"),
            Turn(customer="monkey"),
            Turn(customer="Hm", expect=Expectation(judged="The reply asks which account")),
        ],
    )

    result = run_conversation(test, models(judge))

    assert result.passed, result.describe_failure()
    [asked] = judge.calls
    assert "customer: seldo" in asked.prompt and "monkey" not in asked.prompt
