"""Running the evaluation set against one provider and model, and the numbers it produces: per
decision kind and sub-kind, for the development part, the held-back test part and both."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.eval.cases import KINDS, PARTS, EvalCase, iter_cases, part_of
from bench.eval.decisions import EVALUATORS
from engine.agent_config import AgentConfig, TurnBudget
from engine.errors import LLMError
from engine.llm import TurnLLM
from engine.ports import SchematicLLM
from engine.trace import TurnTrace


@dataclass(frozen=True)
class CaseResult:
    kind: str
    case_id: str
    hard: bool
    part: str  # "dev" or "test" (`bench.eval.cases.part_of`)
    correct: bool
    expect: dict[str, Any]
    got: Any
    subkind: str = ""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0  # the model calls' own time (what TurnLLM records)
    cpu_ms: float = 0.0  # the whole case in this process: prompt building, the call, verification
    error: str | None = None


@dataclass(frozen=True)
class KindRow:
    """One line of the report: a decision kind, or one of its sub-kinds (`journey_node: stay`)."""

    name: str
    cases: int
    correct: int
    hard: int
    hard_correct: int
    errors: int
    prompt_tokens: float  # per case
    completion_tokens: float  # per case
    latency_ms_p50: float
    # part → (cases, right) in that part
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.correct / self.cases if self.cases else 0.0

    def part_accuracy(self, part: str) -> float | None:
        cases, correct = self.parts.get(part, (0, 0))
        return correct / cases if cases else None

    @property
    def hard_accuracy(self) -> float | None:
        return self.hard_correct / self.hard if self.hard else None


@dataclass
class EvalRun:
    provider: str
    model: str
    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0

    def rows(self) -> list[KindRow]:
        """Per kind (in the order of KINDS), each followed by its sub-kinds, then the total;
        each row counts both parts and each part apart."""
        rows: list[KindRow] = []
        for kind in KINDS:
            mine = [r for r in self.results if r.kind == kind]
            if not mine:
                continue
            rows.append(_row(kind, mine))
            subkinds = sorted({r.subkind for r in mine if r.subkind})
            if len(subkinds) > 1:
                rows.extend(
                    _row(f"{kind}: {s}", [r for r in mine if r.subkind == s]) for s in subkinds
                )
        if self.results:
            rows.append(_row("all", self.results))
        return rows

    @property
    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if not r.correct]


def _row(name: str, results: Sequence[CaseResult]) -> KindRow:
    n = len(results)
    latencies = [r.latency_ms for r in results if r.calls]
    return KindRow(
        parts={
            part: (
                sum(r.part == part for r in results),
                sum(r.correct for r in results if r.part == part),
            )
            for part in PARTS
        },
        name=name,
        cases=n,
        correct=sum(r.correct for r in results),
        hard=sum(r.hard for r in results),
        hard_correct=sum(r.correct for r in results if r.hard),
        errors=sum(r.error is not None for r in results),
        prompt_tokens=sum(r.prompt_tokens for r in results) / n,
        completion_tokens=sum(r.completion_tokens for r in results) / n,
        latency_ms_p50=statistics.median(latencies) if latencies else 0.0,
    )


def eval_config(model: str) -> AgentConfig:
    """One decision per case: a budget that never gets in the way, every purpose on `model`."""
    return AgentConfig(
        default_model=model,
        budget=TurnBudget(max_llm_calls=50, max_prompt_tokens=1_000_000),
    )


async def _run_case(
    llm: SchematicLLM, config: AgentConfig, kind: str, case: EvalCase
) -> CaseResult:
    trace = TurnTrace(
        turn_id=f"eval-{case.id}", session_id=f"eval-{case.id}", agent_id=case.agent,
        agent_version="eval",
    )  # fmt: skip
    turn_llm = TurnLLM(llm, config, trace)
    started = time.process_time()
    error: str | None = None
    try:
        outcome = await EVALUATORS[kind](turn_llm, case)
        correct, got, subkind = outcome.correct, outcome.got, outcome.subkind
    except LLMError as exc:
        error = f"{type(exc).__name__}: {exc}"
        correct, got, subkind = False, None, ""
    cpu_ms = (time.process_time() - started) * 1000
    calls = trace.llm_calls
    return CaseResult(
        kind=kind,
        case_id=case.id,
        hard=case.hard,
        part=part_of(case),
        correct=correct,
        expect=case.expect,
        got=got,
        subkind=subkind,
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        completion_tokens=sum(c.completion_tokens for c in calls),
        latency_ms=sum(c.latency_ms for c in calls),
        cpu_ms=cpu_ms,
        error=error,
    )


Progress = Callable[[CaseResult], None]


async def run_eval(
    llm: SchematicLLM,
    cases: Mapping[str, list[EvalCase]],
    *,
    provider: str,
    model: str,
    concurrency: int = 4,
    progress: Progress | None = None,
) -> EvalRun:
    """Every case through `llm`, at most `concurrency` at a time; results in case order.
    A failed model call (after the engine's retries and repair) counts as a wrong answer and is
    reported as an error — one bad call never stops the run."""
    config = eval_config(model)
    gate = asyncio.Semaphore(max(1, concurrency))
    run = EvalRun(provider=provider, model=model)
    started = time.perf_counter()

    async def one(kind: str, case: EvalCase) -> CaseResult:
        async with gate:
            result = await _run_case(llm, config, kind, case)
        if progress is not None:
            progress(result)
        return result

    run.results = list(await asyncio.gather(*[one(k, c) for k, c in iter_cases(cases)]))
    run.seconds = time.perf_counter() - started
    return run
