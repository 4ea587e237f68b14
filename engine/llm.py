"""The engine's one way to call an LLM: `TurnLLM.generate(purpose, prompt, schema)`.

It adds, uniformly for every adapter (OpenAI, offline, scripted):
- per-purpose model routing (`AgentConfig.models`),
- a per-turn budget (max calls, max prompt tokens; one call is reserved for composing the reply),
- a concurrency limit per model (process-wide, per event loop),
- retries with exponential backoff on transient errors, bounded by a per-turn retry budget,
- one repair attempt when the answer does not fit the schema,
- the model's rate limit noted (`rate_limited`): with `stop_when_rate_limited`, a turn whose call
  was still refused with a 429 after its retries makes no further call (each fails at once, as
  rate-limited): the turn is going to be deferred (`engine.turn`), not answered,
- a trace record for every call (purpose, schema, model, prompt size, tokens, latency, round).

The prompt goes to the adapter as the builder made it: an `engine.prompt_text.Prompt` keeps its
mark (where its stable prefix ends) through retries, drafts and the repair, whose note is
appended after the prompt (`extended`), so an adapter that sets cache points places them there.
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from pydantic import BaseModel

from engine.agent_config import AgentConfig, LLMPurpose
from engine.errors import (
    LLMBudgetExceeded,
    LLMError,
    LLMOutputInvalid,
    LLMTransientError,
    is_rate_limit,
)
from engine.ports import Generation, SchematicLLM, Usage
from engine.pricing import PriceTable
from engine.prompt_text import extended
from engine.trace import (
    MAX_RECORDED_ANSWER_CHARS,
    MAX_RECORDED_PROMPT_CHARS,
    LLMCallRecord,
    TurnTrace,
    bounded_text,
)

T = TypeVar("T", bound=BaseModel)

Sleep = Callable[[float], Awaitable[None]]


def estimate_tokens(text: str) -> int:
    """A documented estimate (≈4 characters per token for English prose and JSON)."""
    return max(1, len(text) // 4)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # per call, transient errors only
    backoff_base: float = 0.5
    backoff_max: float = 8.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        base = min(self.backoff_base * (2 ** (attempt - 1)), self.backoff_max)
        return float(
            base * (0.5 + random.random() / 2)
        )  # jitter keeps retries of parallel calls apart


_GATES: dict[
    tuple[int, str, int], tuple[weakref.ref[asyncio.AbstractEventLoop], asyncio.Semaphore]
] = {}


def _gate(model: str, limit: int) -> asyncio.Semaphore:
    """A semaphore per (event loop, model, limit): concurrent turns in one process share it.

    Entries remember their loop weakly, so a new loop that happens to reuse a dead loop's id never
    inherits its semaphore, and entries of closed loops are dropped."""
    loop = asyncio.get_running_loop()
    key = (id(loop), model, limit)
    entry = _GATES.get(key)
    if entry is None or entry[0]() is not loop:
        for stale in [
            k for k, (ref, _) in _GATES.items() if (lp := ref()) is None or lp.is_closed()
        ]:
            del _GATES[stale]
        entry = _GATES[key] = (weakref.ref(loop), asyncio.Semaphore(limit))
    return entry[1]


def _record_answer(
    record: LLMCallRecord, generation: Generation[T], prompt: str, model: str, prices: PriceTable
) -> None:
    """A finished call's answer, model, tokens and price on its trace record (tokens estimated
    when the adapter reports none)."""
    answer = generation.value.model_dump_json()
    record.model = generation.model or model
    record.answer = bounded_text(answer, MAX_RECORDED_ANSWER_CHARS)
    record.prompt_tokens = generation.usage.prompt_tokens or estimate_tokens(prompt)
    record.cached_prompt_tokens = min(generation.usage.cached_prompt_tokens, record.prompt_tokens)
    record.cache_write_tokens = min(
        generation.usage.cache_write_tokens, record.prompt_tokens - record.cached_prompt_tokens
    )
    record.completion_tokens = generation.usage.completion_tokens or estimate_tokens(answer)
    _price(record, prices)


def _price(record: LLMCallRecord, prices: PriceTable) -> None:
    record.cost_usd = prices.cost(
        record.model,
        record.prompt_tokens,
        record.cached_prompt_tokens,
        record.completion_tokens,
        record.cache_write_tokens,
    )


@dataclass
class _Draft:
    task: asyncio.Task[Generation[BaseModel]]
    record: LLMCallRecord


REPAIR_SUFFIX = (
    "\n\nYour previous answer could not be used: {error}\n"
    "Answer again with a single JSON object that matches the requested schema exactly."
)


class TurnLLM:
    """Per-turn facade over a `SchematicLLM` adapter. Create one per turn."""

    def __init__(
        self,
        llm: SchematicLLM,
        config: AgentConfig,
        trace: TurnTrace,
        *,
        retry: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        stop_when_rate_limited: bool = False,
    ) -> None:
        self._llm = llm
        self._config = config
        self._trace = trace
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._prices = PriceTable().with_overrides(config.prices)
        self._calls_started = 0
        self._prompt_tokens_reserved = 0
        self._retries_left = config.llm_retry_budget
        self._stop_when_rate_limited = stop_when_rate_limited
        # The 429 a call finally failed with (after its retries), once one did: the turn is
        # rate-limited. Drafts never set it (a failed draft is simply not used).
        self.rate_limited: LLMTransientError | None = None
        self.round = 0  # the pipeline sets this as it moves through sequential rounds
        # Calls started ahead of their turn (`draft`), by what they ask: (purpose, prompt, schema)
        self._drafts: dict[tuple[LLMPurpose, str, type[BaseModel]], _Draft] = {}

    @property
    def calls_started(self) -> int:
        return self._calls_started

    def can_afford(self, prompt: str, purpose: LLMPurpose) -> bool:
        """Whether a call of this size fits the budget (one call stays reserved for composing).
        Composing the reply, and reading the customer's words for secrets typed ahead (the first
        call of its round), run whatever their prompt costs: a message long enough to exhaust
        the tokens must not leave a password in it unread."""
        budget = self._config.budget
        reserve = 0 if purpose is LLMPurpose.COMPOSE else 1
        if self._calls_started + 1 + reserve > budget.max_llm_calls:
            return False
        tokens = self._prompt_tokens_reserved + estimate_tokens(prompt)
        unbounded = purpose in (LLMPurpose.COMPOSE, LLMPurpose.READ_SECRETS)
        return unbounded or tokens <= budget.max_prompt_tokens

    def draft(self, purpose: LLMPurpose, prompt: str, schema: type[T], *, label: str = "") -> None:
        """Start a call ahead of its turn — a reply drafted from predicted decisions
        (`engine.stages.speculation`). A later `generate` asking the very same (purpose, prompt,
        schema) takes the draft's answer instead of calling again; anything else leaves it
        unused (`settle_drafts`). Outside the turn's budget, retries and repairs: a draft never
        takes a call, a token or a retry a verified decision needs, and one that fails is not
        used (the call is then made as if there had been no draft)."""
        key = (purpose, prompt, schema)
        if key in self._drafts:
            return
        model = self._config.model_for(purpose)
        record = self._record(purpose, prompt, schema, model, label)
        record.draft = "discarded"
        task = asyncio.create_task(self._run_draft(prompt, schema, model, record))
        self._drafts[key] = _Draft(task, record)

    async def _run_draft(
        self, prompt: str, schema: type[BaseModel], model: str, record: LLMCallRecord
    ) -> Generation[BaseModel]:
        started = time.perf_counter()
        try:
            async with _gate(model, self._config.max_concurrent_llm_calls):
                generation: Generation[BaseModel] = await self._llm.generate(
                    prompt, schema, model=model
                )
        except BaseException as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            record.latency_ms = round((time.perf_counter() - started) * 1000, 2)
        _record_answer(record, generation, prompt, model, self._prices)
        return generation

    async def _drafted(
        self, purpose: LLMPurpose, prompt: str, schema: type[T]
    ) -> Generation[T] | None:
        """The draft's answer to exactly this call, if one was started and succeeded."""
        draft = self._drafts.pop((purpose, prompt, schema), None)
        if draft is None:
            return None
        try:
            generation = await draft.task
        except Exception:
            _price(draft.record, self._prices)
            self._trace.llm_calls.append(draft.record)
            return None
        draft.record.draft = "used"
        self._trace.llm_calls.append(draft.record)
        self._trace.llm_rounds = max(self._trace.llm_rounds, draft.record.round)
        return cast(Generation[T], generation)  # keyed by `schema`: its answer is one

    async def settle_drafts(self) -> None:
        """Stop the drafts no call took and record them as discarded (their tokens were spent or
        would be): call before the trace is masked and stored."""
        drafts, self._drafts = list(self._drafts.values()), {}
        for draft in drafts:
            if not draft.task.done():
                draft.task.cancel()
            await asyncio.wait({draft.task})  # cancelled or failed: recorded either way
            if not draft.task.cancelled():
                draft.task.exception()  # retrieved: a failed draft is no unhandled error
            if not draft.record.prompt_tokens:
                draft.record.prompt_tokens = max(1, draft.record.prompt_chars // 4)
                _price(draft.record, self._prices)
            self._trace.llm_calls.append(draft.record)

    async def generate(
        self, purpose: LLMPurpose, prompt: str, schema: type[T], *, label: str = ""
    ) -> Generation[T]:
        """Run one schematic generation under the turn's policy. Raises `LLMBudgetExceeded` before
        calling when the budget does not allow it, `LLMError` subclasses when it finally fails."""
        if self._drafts and self.can_afford(prompt, purpose):
            drafted = await self._drafted(purpose, prompt, schema)
            if drafted is not None:
                self._calls_started += 1  # the draft was this call
                self._prompt_tokens_reserved += estimate_tokens(prompt)
                return drafted
        if self._stop_when_rate_limited and self.rate_limited is not None:
            # Deferred anyway: another call would spend quota on an answer that is thrown away.
            self._trace.notes.append(
                f"rate-limited: skipped {purpose.value} call ({label or schema.__name__})"
            )
            raise LLMTransientError(
                f"the model is rate-limited; {purpose.value} not called",
                status=429,
                retry_after=self.rate_limited.retry_after,
            )
        if not self.can_afford(prompt, purpose):
            self._trace.notes.append(
                f"budget: skipped {purpose.value} call ({label or schema.__name__}); "
                f"{self._calls_started} calls, ~{self._prompt_tokens_reserved} prompt tokens used"
            )
            raise LLMBudgetExceeded(f"turn budget exhausted before {purpose.value}")
        self._calls_started += 1
        self._prompt_tokens_reserved += estimate_tokens(prompt)
        model = self._config.model_for(purpose)
        record = self._record(purpose, prompt, schema, model, label)
        started = time.perf_counter()
        try:
            generation = await self._generate_with_policy(prompt, schema, model, record)
        except LLMError as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            if is_rate_limit(exc):
                self.rate_limited = exc
            _price(record, self._prices)  # a failed call reports no tokens: priced at those
            raise
        finally:
            record.latency_ms = round((time.perf_counter() - started) * 1000, 2)
            self._trace.llm_calls.append(record)
        _record_answer(record, generation, prompt, model, self._prices)
        self._trace.llm_rounds = max(self._trace.llm_rounds, self.round)
        return generation

    def _record(
        self, purpose: LLMPurpose, prompt: str, schema: type[BaseModel], model: str, label: str
    ) -> LLMCallRecord:
        """The trace record of a call about to start (in this round)."""
        return LLMCallRecord(
            purpose=purpose.value,
            schema_name=schema.__name__,
            model=model,
            label=label,
            prompt_chars=len(prompt),
            round=self.round,
            prompt=bounded_text(prompt, MAX_RECORDED_PROMPT_CHARS),
        )

    async def _generate_with_policy(
        self, prompt: str, schema: type[T], model: str, record: LLMCallRecord
    ) -> Generation[T]:
        attempt = 0  # transient-failure attempts
        repaired = False
        current_prompt = prompt
        usage = Usage()
        while True:
            attempt += 1
            record.attempts = attempt + int(repaired)
            try:
                async with _gate(model, self._config.max_concurrent_llm_calls):
                    generation = await self._llm.generate(current_prompt, schema, model=model)
            except LLMTransientError as exc:
                if attempt >= self._retry.max_attempts or self._retries_left <= 0:
                    raise
                self._retries_left -= 1
                await self._sleep(self._retry.delay(attempt, exc.retry_after))
                continue
            except LLMOutputInvalid as exc:
                if repaired:
                    raise
                repaired = True
                attempt -= 1  # the repair is its own attempt, not a transient retry
                # appended after the prompt: its stable prefix (and its mark) stay as they were
                current_prompt = extended(prompt, REPAIR_SUFFIX.format(error=str(exc)[:500]))
                continue
            usage = usage + generation.usage
            return Generation(
                value=generation.value,
                usage=usage,
                model=generation.model,
                latency_ms=generation.latency_ms,
                attempts=attempt + int(repaired),
            )
