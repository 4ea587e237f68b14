"""Turn worker Lambda: consumes the SQS FIFO turn queue, runs turns, delivers replies.

- **Partial batch failures.** Powertools' `SqsFifoPartialProcessor(skip_group_on_error=True)`:
  a failed record is reported in `batchItemFailures`, and so is every later record of the same
  message group (session) in the batch, so a session's messages never overtake each other. Other
  sessions in the batch are unaffected.
- **Bursts** (`functions.worker_bursts`). The messages of one session in a batch (a customer
  typing three lines in a row) are answered by ONE turn that sees all of them
  (`TurnEngine.handle(session, messages)`). `WAYPOINT_REPLY_PER_MESSAGE=1` runs one turn per
  message instead.
- **Delivery through the outbox** (`functions.worker_delivery`). The turn commits, then its
  reply is sent through the channel under the turn's outbox lease and the record flips to SENT.
  A redelivered message replays the turn (no recomputation, no second LLM call) and sends only
  if the record is not SENT; an undeliverable reply is given up after `MAX_DELIVERY_ATTEMPTS`
  and its record acknowledged. Messages from the management API (channel `api`) are not
  delivered: clients read the session's events.
- **A rate-limited model** (`functions.worker_backpressure`). A turn the model could not answer
  because it stayed rate-limited commits nothing (`WAYPOINT_ON_MODEL_RATE_LIMIT=defer`, the
  default): its records fail with a visibility back-off the worker sets itself (2 s doubling
  per receive, at most 60 s), and its customer gets the agent's "one moment" line at most once
  per message. `fallback` answers with the fallback reply instead.
- **Time.** A turn is not started with less than `TURN_TIME_RESERVE_MS` of the invocation left
  (`context.get_remaining_time_in_millis()`): the untouched records are reported as batch item
  failures and come back, rather than being cut off by the Lambda Timeout.
- **Observability.** Powertools Logger (session id as correlation id; text lengths only, never
  message text), Metrics (EMF: turn latency, LLM calls, prompt tokens, tool errors, deliveries)
  and X-Ray: Lambda's active tracing for every invocation; the SDK's subsegments only with
  `WAYPOINT_XRAY_SDK=1`, loaded on the first invocation (`functions.tracing`), never at import.

Handoffs (a person's messages, the Slack support thread) are `functions.worker_handoff`. In a
Lambda container the runtime (engine, stores, the LLM client, the channels' HTTP client) is built
at import, in Lambda's init phase, and the garbage collector frozen after it
(`functions.worker_init`); elsewhere (tests, the local server) on the first record.
"""

from __future__ import annotations

from functions.worker_init import enter_init_phase, in_lambda_container, init_container
from infra.deferred_init import POWERTOOLS_EVENT_CLASSES, defer_init

# In a Lambda container, no garbage collection while the init phase imports and builds (the
# collector is frozen over what it built, then resumed), one OpenBLAS thread: `worker_init`.
enter_init_phase()
# Powertools' batch utility reads four of its event classes; the `__init__` of their package
# imports every event source's (≈ 60 modules, ≈ 18 ms of a cold start): deferred, the classes
# are the same (`infra.deferred_init`; tests/infra/test_deferred_init.py).
defer_init(POWERTOOLS_EVENT_CLASSES)

import time  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from aws_lambda_powertools.metrics import MetricUnit  # noqa: E402
from aws_lambda_powertools.metrics.functions import is_metrics_disabled  # noqa: E402
from aws_lambda_powertools.utilities.batch import (  # noqa: E402
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord  # noqa: E402

from engine.errors import WaypointError  # noqa: E402
from engine.privacy.erasure import erasures_of, written_before_erasure  # noqa: E402
from engine.sessions.session import InboundMessage, SessionState  # noqa: E402
from functions.worker_backpressure import Backpressure, deferral_of  # noqa: E402
from functions.worker_bursts import BatchPlan, Burst, MalformedQueueMessage, plan_bursts  # noqa: E402
from functions.worker_delivery import ReplyDelivery  # noqa: E402
from functions.worker_handoff import deliver_person_message, support_replies, to_support_thread  # noqa: E402
from functions.worker_replies import replies_for  # noqa: E402
from functions.worker_telemetry import logger, metrics, tracer  # noqa: E402
from infra.channels.base import ReplyOption  # noqa: E402
from infra.handoff_changes import QueuedPersonMessage  # noqa: E402
from infra.runtime import Runtime, current_runtime  # noqa: E402
from infra.turn_queue import QueuedMessage  # noqa: E402

if TYPE_CHECKING:
    from engine.turn import TurnOutput

processor = SqsFifoPartialProcessor(skip_group_on_error=True)
# Report every record as failed rather than raising when all fail: same retry, no Lambda error.
processor.raise_on_entire_batch_failure = False


class OutOfTime(WaypointError):
    """Too little of the invocation is left to run a turn; the record is retried by SQS."""


# A turn is not started with less than this left of the invocation: the management API runs a
# whole turn within its 29 s Timeout, so 30 s is enough for one; a turn cut off by the Lambda
# Timeout would come back only after the queue's visibility timeout.
TURN_TIME_RESERVE_MS = 30_000


class TurnWorker:
    """Answers the bursts of one SQS batch; `handle_record` is Powertools' record handler.

    Runs the turns; their replies go out through `delivery` (`functions.worker_delivery`), a
    person's messages through `functions.worker_handoff`."""

    def __init__(self, runtime: Runtime, plan: BatchPlan, context: Any = None) -> None:
        self.runtime = runtime
        self.plan = plan
        self.context = context  # the Lambda context: how much of the invocation is left
        self.delivery = ReplyDelivery(runtime, self._remaining_ms)
        self.backpressure = Backpressure(runtime)

    def handle_record(self, record: SQSRecord) -> None:
        burst = self.plan.get(record.message_id)
        if burst is None:
            raise MalformedQueueMessage("record missing from the batch plan")
        if isinstance(burst, MalformedQueueMessage):
            logger.error("malformed queue message", extra={"reason": str(burst)})
            raise burst
        if isinstance(burst, QueuedPersonMessage):
            logger.set_correlation_id(burst.session_id)
            self.runtime.run(deliver_person_message(self.runtime, self.delivery, burst))
            return
        if burst.answered:
            return  # answered together with the first record of its burst
        logger.set_correlation_id(burst.session_id)
        remaining = self._remaining_ms()
        if remaining is not None and remaining < TURN_TIME_RESERVE_MS:
            metrics.add_metric(name="RecordsDeferred", unit=MetricUnit.Count, value=1)
            raise OutOfTime(
                f"{remaining} ms left of the invocation, under the {TURN_TIME_RESERVE_MS} ms a "
                "turn needs; SQS retries this record"
            )
        try:
            self.runtime.run(self.answer(burst))
        except Exception as exc:
            limited = deferral_of(exc, self.runtime.settings)
            if limited is None:
                raise
            # Nothing was committed: the records come back after a back-off (`give_back`).
            raise self.runtime.run(
                self.backpressure.defer(burst, record.raw_event, limited)
            ) from exc
        burst.answered = True

    def _remaining_ms(self) -> int | None:
        remaining = getattr(self.context, "get_remaining_time_in_millis", None)
        return int(remaining()) if callable(remaining) else None

    @tracer.capture_method
    async def answer(self, burst: Burst) -> None:
        """One turn for the burst's messages, then deliver what they were answered with."""
        from infra.channels.typing import typing_while

        started = time.perf_counter()
        last = burst.requests[-1].message
        relay = self.runtime.settings.support_relay
        if relay is not None and relay.in_channel(last):  # the support side: no turn (handoff)
            await support_replies(self.runtime, self.delivery, burst)
            return
        channel = self.runtime.channels.get(last.channel)
        messages = [await self._inbound(q) for q in burst.requests]
        # "Typing…" from pickup until the turn ends (best effort: never fails the turn).
        async with typing_while(channel, last.reply_to, self.runtime.http):
            output = await self._turn(burst, messages)
        self._record_turn(burst, output, (time.perf_counter() - started) * 1000)
        if channel is None:
            return  # e.g. "api": the management API's clients read the session's events
        if output.dropped and not output.new_events:
            return  # written by someone erased since: nothing to answer (engine.privacy.erasure)
        for pending in replies_for(output.state, burst.requests):
            await self.delivery.deliver(channel, burst.session_id, pending)
        await to_support_thread(self.runtime, output)

    async def _inbound(self, queued: QueuedMessage) -> InboundMessage:
        """The engine's message; a compacted button id (Telegram's 64-byte callback data) is
        mapped back to the option it stands for, using the session's pending options."""
        inbound = queued.message.to_inbound()
        choice = inbound.choice
        if not choice or not choice.startswith("~"):
            return inbound
        from infra.channels.options import resolve_choice

        session = await self.runtime.sessions.load(queued.session_id)
        pending = session.pending_interrupt if session else None
        offered = [
            ReplyOption(id=str(o["id"]), label=str(o.get("label") or o["id"]))
            for o in (pending.options if pending else ())
            if o.get("id")
        ]
        resolved = resolve_choice(choice, offered)
        return inbound.model_copy(update={"choice": resolved}) if resolved else inbound

    async def _turn(self, burst: Burst, messages: list[InboundMessage]) -> TurnOutput:
        engine = self.runtime.engine
        try:
            return await engine.handle(burst.session_id, messages)
        except KeyError:
            # The webhook creates sessions; one missing here was lost or deleted: recreate it.
            if await self.runtime.sessions.load(burst.session_id) is not None:
                raise
            session = await _new_session(self.runtime, burst.requests[0], messages)
            digest = self.runtime.sessions.person_digest
            if all(written_before_erasure(m, session, digest) for m in messages):
                # Deleted by their erasure with these still queued: nothing is recreated.
                from engine.turn import dropped_turn, turn_id_for

                turn_id = turn_id_for(burst.session_id, messages)
                return dropped_turn(session, turn_id, len(messages))
            await self.runtime.sessions.create(session)
            return await engine.handle(burst.session_id, messages)

    def _record_turn(self, burst: Burst, output: TurnOutput, latency_ms: float) -> None:
        trace = output.trace
        tool_errors = sum(1 for call in trace.tool_calls if call.status == "error")
        if output.dropped:  # how many, never whose (they were erased)
            metrics.add_metric(name="MessagesDropped", unit=MetricUnit.Count, value=output.dropped)
            if not output.new_events:
                logger.info(
                    "turn dropped: its messages were written before their sender was erased",
                    extra={"session_id": burst.session_id, "messages": output.dropped},
                )
                return
        logger.info(
            "turn replayed" if output.replayed else "turn committed",
            extra={
                "session_id": burst.session_id,
                "turn_id": trace.turn_id,
                "messages": len(burst.requests),
                "chars_in": sum(len(q.message.text) for q in burst.requests),
                "chars_out": len(output.reply.text or "") if output.reply else 0,
                "llm_calls": len(trace.llm_calls),
                "prompt_tokens": trace.prompt_tokens,
                "tool_errors": tool_errors,
                "latency_ms": round(latency_ms, 1),
            },
        )
        if output.replayed:
            metrics.add_metric(name="TurnsReplayed", unit=MetricUnit.Count, value=1)
            return
        metrics.add_metric(name="TurnLatency", unit=MetricUnit.Milliseconds, value=latency_ms)
        metrics.add_metric(name="MessagesPerTurn", unit=MetricUnit.Count, value=len(burst.requests))
        metrics.add_metric(name="LLMCalls", unit=MetricUnit.Count, value=len(trace.llm_calls))
        metrics.add_metric(name="PromptTokens", unit=MetricUnit.Count, value=trace.prompt_tokens)
        metrics.add_metric(name="ToolErrors", unit=MetricUnit.Count, value=tool_errors)


async def _new_session(
    runtime: Runtime, queued: QueuedMessage, messages: list[InboundMessage]
) -> SessionState:
    """The session to recreate for `queued`, remembering the erasures of the burst's senders
    (a session deleted by an erasure: their messages still queued are dropped)."""
    customer = queued.message.customer_id
    senders = [customer, *(m.sender_id or customer for m in messages)]
    return SessionState(
        id=queued.session_id,
        agent_id=queued.agent_id,
        customer_id=customer,
        channel=queued.message.channel,
        metadata={"account_id": queued.message.account_id},
        erased_senders=await erasures_of(runtime.sessions, queued.message.channel, senders),
    )


# --------------------------------------------------------------------------------------------------
# Lambda entry point


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
# The cold-start metric bypasses POWERTOOLS_METRICS_DISABLED, so honor it here (local runs).
@metrics.log_metrics(capture_cold_start_metric=not is_metrics_disabled())
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS FIFO event → `{"batchItemFailures": [...]}`."""
    runtime = current_runtime()
    records = event.get("Records") or []
    plan = plan_bursts(records, per_message=runtime.settings.reply_per_message)
    worker = TurnWorker(runtime, plan, context)
    response = process_partial_response(
        event=event, record_handler=worker.handle_record, processor=processor, context=context
    )
    failures = {str(f["itemIdentifier"]) for f in response.get("batchItemFailures", [])}
    worker.backpressure.give_back(records, failures)  # deferred turns: their back-off
    failed = len(failures)
    metrics.add_metric(name="RecordsFailed", unit=MetricUnit.Count, value=failed)
    if failed:
        logger.warning("batch partially failed", extra={"records": len(records), "failed": failed})
    return dict(response)


# Lambda's init phase: in a Lambda container, the runtime is built now, not in the first
# invocation (`functions.worker_init`); elsewhere (tests, the local server) on first use.
if in_lambda_container():
    init_container()

__all__ = ["OutOfTime", "TurnWorker", "handler"]
