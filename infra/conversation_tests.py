"""Running conversation tests (`waypoint test`, the pytest plugin, and the Python form).

A test is a scripted conversation with one agent (`engine.conversations.spec`); each run gets a
fresh engine over in-memory stores, the agent's own tools in process, and the model the
environment selects (`infra.llm.factory`: offline unless OPENAI_API_KEY is set). The file format
is documented in docs/conversation-tests.md.

Python form::

    from engine.conversations.spec import ConversationTest, Expectation, Turn
    from infra.conversation_tests import run_conversation

    test = ConversationTest(name="greets", agent=Path("agent.yaml"), tools="tools",
                            turns=[Turn(customer="Hi", expect=Expectation(reply_contains=["hello"]))])
    run_conversation(test).raise_for_failure()
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from engine.authoring.document_syntax import describe_syntax_error
from engine.conversations.checks import (
    Unmet,
    check_turn,
    judge_reply,
    reply_text,
    transcript_lines,
)
from engine.conversations.spec import ConversationTest
from engine.errors import WaypointError
from engine.ports import Embedder, SchematicLLM

TEST_SUFFIX = ".conv.yaml"
_SKIP_DIRS = {".venv", "venv", ".git", "node_modules", "__pycache__", ".tox"}
_SHARED_KEYS = ("agent", "tools", "setup", "customer_id")
NEEDS_REAL_MODEL = (
    "needs a real model (set OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server)"
)
JUDGED_SKIPPED_NOTE = f"judged expectation skipped: it {NEEDS_REAL_MODEL}"


class InvalidConversationTest(WaypointError):
    """A conversation test file that cannot be read; the message names the file and the field."""


class InvalidAgentUnderTest(InvalidConversationTest):
    """The agent a test names cannot be loaded: every test of that agent fails the same way, so
    reports tell it once (`infra.conversation_report`)."""

    def __init__(self, message: str, agent: Path) -> None:
        super().__init__(message)
        self.agent = agent


class ConversationTestFailed(AssertionError):
    """Raised by `RunResult.raise_for_failure`; the message is the failure block."""


# ------------------------------------------------------------------------------------------------
# finding and loading tests


def discover(path: Path) -> list[Path]:
    """Test files under `path`: the file itself, or every `*.conv.yaml` below a folder."""
    if path.is_file():
        return [path]
    if not path.exists():
        raise InvalidConversationTest(f"{path} does not exist")
    return sorted(
        p
        for p in path.rglob(f"*{TEST_SUFFIX}")
        if not _SKIP_DIRS.intersection(p.relative_to(path).parts)
    )


def collect_tests(path: Path) -> list[ConversationTest]:
    """Every test in every file `discover` finds under `path`."""
    return [test for file in discover(path) for test in load_file(file)]


def load_file(path: Path) -> list[ConversationTest]:
    """The tests of one file: a single test (`turns:` at the top), or `tests:` sharing the file's
    `agent`, `tools`, `setup` and `customer_id`. Relative agent paths resolve from the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidConversationTest(f"{path}: cannot be read: {exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # The file, line and column, the line itself and the likely cause.
        raise InvalidConversationTest(describe_syntax_error(exc, text, "yaml", str(path))) from None
    if not isinstance(document, dict):
        raise InvalidConversationTest(f"{path}: expected a mapping with `turns:` or `tests:`")
    if "tests" in document:
        shared = {k: document[k] for k in _SHARED_KEYS if k in document}
        unknown = set(document) - {*_SHARED_KEYS, "tests"}
        if unknown:
            raise InvalidConversationTest(
                f"{path}: unknown top-level field(s) {sorted(unknown)}; a file with `tests:` "
                f"takes only {', '.join(_SHARED_KEYS)} beside it"
            )
        entries = document["tests"]
        if not isinstance(entries, list) or not entries:
            raise InvalidConversationTest(f"{path}: `tests:` must be a non-empty list of tests")
    else:
        shared, entries = {}, [document]
    tests = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InvalidConversationTest(f"{path}: tests[{index}] must be a mapping")
        default_name = path.name.removesuffix(TEST_SUFFIX).removesuffix(".yaml")
        data = {"name": default_name, **shared, **entry, "source": path}
        try:
            test = ConversationTest.model_validate(data)
        except ValidationError as exc:
            where = f"{path}: test {data.get('name')!r}"
            raise InvalidConversationTest(f"{where}: {_problems(exc)}") from None
        if not test.agent.is_absolute():  # `../agent.yaml` from tests/ is agent.yaml
            agent = Path(os.path.normpath(path.parent / test.agent))
            test = test.model_copy(update={"agent": agent})
        tests.append(test)
    return tests


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in exc.errors()
    )


# ------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class TurnFailure:
    """Where a run failed: the turn (1-based), what the customer said, each unmet expectation."""

    turn: int
    said: str
    unmet: list[Unmet]


@dataclass
class RunResult:
    """One run of one test."""

    test: ConversationTest
    failure: TurnFailure | None = None
    error: str | None = None  # the run could not go on: the agent, tools or a turn raised
    invalid_agent: Path | None = None  # set when `error` is that the test's agent is invalid
    skipped_judgements: list[str] = field(default_factory=list)  # "turn 3: <expectation>"
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.failure is None and self.error is None

    def describe_failure(self) -> str:
        """The failure as one block: which turn, which expectation, what was seen instead."""
        if self.error is not None:
            return f"  {self.error}"
        if self.failure is None:
            return ""
        lines = [f"  turn {self.failure.turn} (customer: {self.failure.said})"]
        for unmet in self.failure.unmet:
            lines.append(f"    expected: {unmet.expected}")
            lines.append(f"    saw:      {unmet.saw}")
        return "\n".join(lines)

    def raise_for_failure(self) -> None:
        """Raise `ConversationTestFailed` with the failure block when the run did not pass."""
        if not self.passed:
            raise ConversationTestFailed(f"{self.test.name}\n{self.describe_failure()}")


@dataclass
class TestOutcome:
    """Every run of one test: it passes when all `k` runs pass (pass^k)."""

    __test__ = False  # not a pytest class, despite the name
    test: ConversationTest
    runs: list[RunResult]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.runs)

    @property
    def passes(self) -> int:
        return sum(r.passed for r in self.runs)

    def first_failure(self) -> RunResult | None:
        return next((r for r in self.runs if not r.passed), None)


# ------------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True)
class Models:
    """The model and embedder every run uses; `real` says whether judged expectations run."""

    llm: SchematicLLM
    embedder: Embedder
    real: bool


def models_from_environment() -> Models:
    """The provider `infra.llm.factory` selects (offline unless OPENAI_API_KEY is set or
    WAYPOINT_LLM_PROVIDER names one), routing each call to its model's provider."""
    from infra.llm.factory import build_embedder, build_routed_llm, resolve_provider

    return Models(build_routed_llm(), build_embedder(), real=resolve_provider() != "offline")


def run_conversation(test: ConversationTest, models: Models | None = None) -> RunResult:
    """Run `test` once, synchronously (for scripts and pytest)."""
    return asyncio.run(run_once(test, models or models_from_environment()))


def run_tests(
    tests: list[ConversationTest], *, repeat: int = 1, models: Models | None = None
) -> list[TestOutcome]:
    """Run each test `repeat` times; a fresh engine and session for every run, all on one event
    loop (the model's client is shared by every run)."""
    chosen = models or models_from_environment()

    async def run_all() -> list[TestOutcome]:
        return [
            TestOutcome(test, [await run_once(test, chosen) for _ in range(repeat)])
            for test in tests
        ]

    return asyncio.run(run_all())


async def run_once(test: ConversationTest, models: Models) -> RunResult:
    """One run: setup, a fresh engine, each turn checked in order; stops at the first failing
    turn (later turns would only report the consequences)."""
    started = time.perf_counter()
    result = RunResult(test)
    try:
        say, agent_model = await _start(test, _reading(test, models))
    except InvalidAgentUnderTest as exc:
        result.error, result.invalid_agent = str(exc), exc.agent
        return result
    except WaypointError as exc:
        result.error = str(exc)
        return result
    except Exception as exc:  # the user's setup or tools module broke on import or call
        result.error = f"the test could not start: {type(exc).__name__}: {exc}"
        return result
    transcript: dict[int, tuple[str, str]] = {}  # the messages by offset, as the store keeps them
    for number, turn in enumerate(test.turns, start=1):
        try:
            output = await say(turn.customer, turn.choice)
        except Exception as exc:  # a user's tool or the model broke the turn: report, go on
            result.error = (
                f"turn {number} (customer: {turn.describe()}) raised {type(exc).__name__}: {exc}"
            )
            break
        text = reply_text(output)
        transcript.update(transcript_lines((*output.masked_events, *output.new_events)))
        reply = output.reply.offset if output.reply is not None else None
        conversation = [line for at, line in sorted(transcript.items()) if at != reply]
        unmet = check_turn(turn.expect, output)
        if turn.expect.judged is not None:
            if not models.real:
                result.skipped_judgements.append(f"turn {number}: {turn.expect.judged}")
            else:
                verdict = await judge_reply(
                    models.llm, turn.expect.judged, conversation, text, model=agent_model
                )
                unmet += [verdict] if verdict is not None else []
        if unmet:
            result.failure = TurnFailure(number, turn.describe(), unmet)
            break
    result.seconds = time.perf_counter() - started
    return result


def _reading(test: ConversationTest, models: Models) -> Models:
    """The offline model reads glossed turns (`means:`) through their glosses; a real model
    reads the customer's own words."""
    glosses = {t.customer: t.means for t in test.turns if t.means is not None and t.customer}
    if models.real or not glosses:
        return models
    from infra.offline.glossed import Glossed

    return Models(Glossed(models.llm, glosses, "English"), models.embedder, models.real)


async def _start(test: ConversationTest, models: Models) -> tuple[Any, str]:
    """A fresh engine for the test's agent; returns `say(text, choice)` and the judge's model."""
    from engine.agent_config import LLMPurpose
    from engine.authoring import load_agent
    from engine.errors import InvalidAgentDefinition
    from engine.memory.stores import InMemoryAgentStore, InMemorySessionStore
    from engine.recall.vectors import agent_index_texts, build_index
    from engine.sessions.session import InboundMessage, SessionState
    from engine.toolkit import InProcessDispatcher, registry_from_module
    from engine.turn import EngineDeps, TurnEngine, TurnOutput

    _local_modules_importable()
    if test.setup:
        _call_setup(test.setup)
    # The tools first: an agent file may name its tools only, their schema is the registry's.
    registry = registry_from_module(test.tools, setting="tools") if test.tools else None
    check = f"waypoint validate {test.agent}" + (f" --tools {test.tools}" if test.tools else "")
    try:
        agent = load_agent(test.agent, tools=registry.specs if registry else None)
    except InvalidAgentDefinition as exc:
        problems = "\n".join(exc.problems).replace("\n", "\n    ")
        raise InvalidAgentUnderTest(
            f"agent {test.agent} is invalid (run `{check}`):\n    {problems}", test.agent
        ) from None
    except OSError as exc:
        raise InvalidAgentUnderTest(
            f"agent {test.agent} cannot be read: {exc}", test.agent
        ) from None
    tools = InProcessDispatcher(registry) if registry else None
    agents, sessions = InMemoryAgentStore(), InMemorySessionStore()
    await agents.publish(agent)
    index = await build_index(models.embedder, agent_index_texts(agent))

    async def index_for(_agent: object) -> Any:
        return index

    engine = TurnEngine(
        agents,
        sessions,
        EngineDeps(llm=models.llm, embedder=models.embedder, tools=tools),
        index_for=index_for,
    )
    session = SessionState(id="conversation-test", agent_id=agent.id, customer_id=test.customer_id)
    await sessions.create(session)
    counter = iter(range(1, 1_000_000))

    async def say(text: str, choice: str | None) -> TurnOutput:
        message = InboundMessage(event_id=f"m{next(counter)}", text=text, choice=choice)
        return await engine.handle(session.id, [message])

    return say, agent.config.model_for(LLMPurpose.COMPOSE)


def _local_modules_importable() -> None:
    # A console script does not put the working directory on sys.path; the user's tools module
    # lives there (`tools: tools` next to agent.yaml), so it must import like `python -m` would.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _call_setup(reference: str) -> None:
    module_name, _, function_name = reference.partition(":")
    if not function_name:
        raise InvalidConversationTest(
            f"setup {reference!r} must be `module:function`, e.g. examples.banking.bank:reset_bank"
        )
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise InvalidConversationTest(f"setup {reference!r} cannot be loaded: {exc}") from None
    function()
