"""What one customer message costs in requests, measured on the moto stack: the billing inputs of
the monthly cost in docs/deploy.md ("What a month costs"). `python -m bench turn-requests`.

The benchmarks' banking conversation (`BANKING_CONVERSATION`, ten messages) is sent by two
customers as Telegram messages through the real webhook and turn-worker handlers, on the local
stack built from template.yaml, with the benchmarks' fake LLM (zero latency) and the banking tools
in process. botocore event hooks on every client count each AWS call, attributed to the function
that made it, with the units DynamoDB bills for it:

- writes: one write request unit per KB of the item written (a conditional write that fails
  still costs one), twice that inside a transaction (TransactWriteItems);
- reads: per 4 KB of what a GetItem or Query reads, one read unit strongly consistent, half
  eventually consistent, twice inside a transaction.

Item sizes are measured as DynamoDB bills them (`bench.long_session.dynamodb_item_size`); an
UpdateItem's is the item's size after the update. Also counted: the model's calls and tokens
(chars/4, the engine's estimate), the text embedded for recall, the tool batches (one Step
Functions execution each in AWS) and calls (one tool-function invocation each), the SQS messages
sent, and the bytes the handlers log (Powertools' JSON lines and EMF metrics). What the event
source mapping does (receive, delete) is not the function's and is counted from the messages.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.fake_llm import BenchLLM, LatencyModel
from bench.long_session import dynamodb_item_size
from bench.scenarios import BANKING_CONVERSATION
from bench.tokens import EstimateCounter

CUSTOMERS = 2
WRITE_UNIT, READ_UNIT = 1024, 4096
TELEGRAM_API = "https://telegram.test"
TG_SECRET, TG_TOKEN = "turn-requests-secret", "700100200:bench-token"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:waypoint-local-turns.fifo"
DEPLOYED_ENV = {
    "POWERTOOLS_METRICS_NAMESPACE": "Waypoint",
    "POWERTOOLS_TRACE_DISABLED": "1",  # X-Ray is priced in docs/deploy.md, not emulated here
    "WAYPOINT_SECRET_DIGEST_KEY": "bench-turn-requests-digest-key-0123456789",
}


@dataclass
class FunctionCalls:
    """What one function asked of AWS over the run."""

    calls: Counter[str] = field(default_factory=Counter)  # "dynamodb.PutItem" → count
    # Bytes of the items a transaction puts, by the kind of item (its sort key's first part:
    # TRACE, EVENT, TURN, …): what a turn adds to the table.
    stored: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    log_bytes: int = 0
    invocations: int = 0


@dataclass
class TurnRequests:
    """Totals over the run, and the number of customer messages they served."""

    messages: int
    functions: dict[str, FunctionCalls]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    embedded_chars: int
    tool_batches: int
    tool_calls: int
    queued: int
    seconds: float

    def per_message(self, value: float) -> float:
        return value / self.messages


class Meter:
    """botocore hooks counting every call of every client created while installed."""

    def __init__(self, raw_ddb: Any) -> None:
        self.raw = raw_ddb  # a client without the hooks: reads an updated item's size
        self.functions: dict[str, FunctionCalls] = {}
        self.current: FunctionCalls | None = None

    @contextlib.contextmanager
    def acting_as(self, function: str) -> Iterator[FunctionCalls]:
        counts = self.functions.setdefault(function, FunctionCalls())
        previous, self.current = self.current, counts
        try:
            yield counts
        finally:
            self.current = previous

    def install(self, client: Any) -> None:
        client.meta.events.register("provide-client-params", self._params)
        client.meta.events.register("after-call", self._after)

    def _params(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        if self.current is None:
            return
        self.current.calls[f"{model.service_model.service_name}.{model.name}"] += 1
        context["bench_params"] = params

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self.current is None or model.service_model.service_name != "dynamodb":
            return
        params = context.get("bench_params", {})
        self.current.write_units += self._written(model.name, params)
        self.current.read_units += self._read(model.name, params, parsed)

    def _written(self, operation: str, params: dict[str, Any]) -> float:
        if operation == "PutItem":
            return _units(dynamodb_item_size(params["Item"]), WRITE_UNIT)
        if operation in ("UpdateItem", "DeleteItem"):
            return _units(self._size_now(params["TableName"], params["Key"]), WRITE_UNIT)
        if operation == "BatchWriteItem":
            requests = [r for rs in params["RequestItems"].values() for r in rs]
            return float(len(requests))  # deletes of small items: one unit each
        if operation == "TransactWriteItems":
            units = 0.0
            for item in params["TransactItems"]:
                ((kind, action),) = item.items()
                if kind == "Put":
                    size = dynamodb_item_size(action["Item"])
                    if self.current is not None:
                        self.current.stored[_item_kind(action["Item"])] += size
                else:
                    size = self._size_now(action["TableName"], action["Key"])
                units += 2 * _units(size, WRITE_UNIT)
            return units
        return 0.0

    def _read(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
        consistent = 1.0 if params.get("ConsistentRead") else 0.5
        if operation == "GetItem":
            item = parsed.get("Item")
            return consistent * _units(dynamodb_item_size(item) if item else 0, READ_UNIT)
        if operation == "Query":
            size = sum(dynamodb_item_size(item) for item in parsed.get("Items", []))
            return consistent * _units(size, READ_UNIT)
        if operation == "BatchGetItem":
            items = [i for items in parsed.get("Responses", {}).values() for i in items]
            return sum(consistent * _units(dynamodb_item_size(i), READ_UNIT) for i in items)
        if operation == "TransactGetItems":
            items = [r.get("Item") for r in parsed.get("Responses", [])]
            return sum(2 * _units(dynamodb_item_size(i) if i else 0, READ_UNIT) for i in items)
        return 0.0

    def _size_now(self, table: str, key: dict[str, Any]) -> int:
        item = self.raw.get_item(TableName=table, Key=key).get("Item")
        return dynamodb_item_size(item) if item else 0


def _item_kind(item: dict[str, Any]) -> str:
    sort_key = str(item.get("sk", {}).get("S", ""))
    return sort_key.split("#", 1)[0] or "?"


def _units(size: int, unit: int) -> float:
    return float(max(1, -(-size // unit)))


def _telegram_event(chat: int, update_id: int, text: str) -> dict[str, Any]:
    update = {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "from": {"id": chat, "is_bot": False, "first_name": "Bench"},
            "chat": {"id": chat, "type": "private"},
            "date": int(time.time()),
            "text": text,
        },
    }
    body = json.dumps(update)
    host = "bench.execute-api.us-east-1.amazonaws.com"
    return {
        "version": "2.0",
        "routeKey": "POST /webhooks/{channel}",
        "rawPath": "/webhooks/telegram",
        "rawQueryString": "",
        "headers": {
            "host": host,
            "content-type": "application/json",
            "content-length": str(len(body)),
            "x-telegram-bot-api-secret-token": TG_SECRET,
        },
        "pathParameters": {"channel": "telegram"},
        "requestContext": {
            "http": {"method": "POST", "path": "/webhooks/telegram", "sourceIp": "203.0.113.7"},
            "domainName": host,
            "requestId": uuid.uuid4().hex,
            "routeKey": "POST /webhooks/{channel}",
            "stage": "$default",
            "timeEpoch": int(time.time() * 1000),
        },
        "body": body,
        "isBase64Encoded": False,
    }


def _telegram_api(request: Any) -> Any:
    import httpx

    return httpx.Response(200, json={"ok": True, "result": {"message_id": 1}})


def measure() -> TurnRequests:
    """Run the conversation through the handlers on a fresh local stack and count."""
    import botocore.session
    import httpx
    from pydantic import SecretStr

    from examples import banking
    from examples.banking import bank
    from functions import webhook, worker
    from infra.aws import clients
    from infra.aws.lambda_routing import LocalLambdaContext
    from infra.aws.local_stack import LocalStack
    from infra.channels.registry import ChannelSecrets, build_channels
    from infra.embeddings import HashingEmbedder
    from infra.runtime import Runtime, install_runtime, reset_runtime
    from infra.runtime_settings import RuntimeSettings
    from waypoint.queue_poller import queue_records

    started = time.perf_counter()
    saved_bank, bank.BANK = bank.BANK, bank.Bank()
    saved_env = {name: os.environ.get(name) for name in DEPLOYED_ENV}
    # As deployed: the worker's metrics namespace, a digest key (else it logs its absence).
    os.environ.update(DEPLOYED_ENV)
    llm = BenchLLM(LatencyModel(0.0), EstimateCounter())
    embedded: list[int] = []
    hashing = HashingEmbedder()

    class CountingEmbedder:
        dimensions = hashing.dimensions

        async def embed(self, texts: Any) -> Any:
            embedded.append(sum(len(t) for t in texts))
            return await hashing.embed(texts)

    with LocalStack() as stack:
        meter = Meter(stack.client("dynamodb"))
        original = botocore.session.Session.create_client

        def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(self, *args, **kwargs)
            meter.install(client)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        clients.reset_clients()
        try:
            secrets = ChannelSecrets(
                telegram_secret_token=SecretStr(TG_SECRET), telegram_bot_token=SecretStr(TG_TOKEN)
            )
            runtime = install_runtime(
                Runtime(
                    RuntimeSettings(agent_id="bank", tools_module="examples.banking.tools"),
                    llm=llm,
                    embedder=CountingEmbedder(),
                    channels=build_channels(secrets, base_urls={"telegram": TELEGRAM_API}),
                    http=httpx.AsyncClient(transport=httpx.MockTransport(_telegram_api)),
                )
            )
            runtime.run(runtime.publish_agent(banking.load()))  # not a turn: not counted
            tools = runtime.tools
            assert tools is not None
            batches: list[int] = []
            dispatch = tools.dispatch

            async def counted(calls: Any, context: Any) -> Any:
                batches.append(len(calls))
                return await dispatch(calls, context)

            tools.dispatch = counted  # type: ignore[method-assign]
            llm.calls.clear()
            embedded.clear()
            sqs = stack.client("sqs")
            queued = 0
            update = 0
            with _deployed_log_levels():
                for customer in range(CUSTOMERS):
                    for text in BANKING_CONVERSATION:
                        update += 1
                        event = _telegram_event(900 + customer, update, text)
                        with meter.acting_as("WebhookFunction") as counts:
                            counts.invocations += 1
                            counts.log_bytes += _logged(
                                lambda e=event: webhook.handler(e, LocalLambdaContext("webhook"))
                            )
                        received = sqs.receive_message(
                            QueueUrl=stack.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
                        ).get("Messages", [])
                        queued += len(received)
                        records = queue_records(received, QUEUE_ARN)
                        with meter.acting_as("WorkerFunction") as counts:
                            counts.invocations += 1
                            counts.log_bytes += _logged(
                                lambda r=records: worker.handler(
                                    {"Records": r}, LocalLambdaContext("worker")
                                )
                            )
                        for message in received:
                            sqs.delete_message(
                                QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"]
                            )
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]
            clients.reset_clients()
            reset_runtime()
            bank.BANK = saved_bank
            for name, value in saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return TurnRequests(
        messages=CUSTOMERS * len(BANKING_CONVERSATION),
        functions=meter.functions,
        llm_calls=len(llm.calls),
        prompt_tokens=sum(c.prompt_tokens for c in llm.calls),
        completion_tokens=sum(c.completion_tokens for c in llm.calls),
        embedded_chars=sum(embedded),
        tool_batches=len(batches),
        tool_calls=sum(batches),
        queued=queued,
        seconds=time.perf_counter() - started,
    )


def _logged(call: Any) -> int:
    """Run `call`, returning the bytes it wrote to the log: what its loggers' stream handlers
    (Powertools' JSON lines) and `print` (Powertools' EMF metrics) wrote — what Lambda sends to
    the function's log group."""
    buffer = io.StringIO()
    handlers = [
        handler
        for logger in [logging.getLogger(), *_loggers()]
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler)
        and not type(handler).__module__.startswith("_pytest")  # a test run's own capture
    ]
    saved = [(handler, handler.stream) for handler in handlers]
    for handler in handlers:
        handler.setStream(buffer)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            call()
    finally:
        for handler, stream in saved:
            handler.setStream(stream)
    return len(buffer.getvalue().encode())


@contextlib.contextmanager
def _deployed_log_levels() -> Iterator[None]:
    """The handlers' Powertools loggers at INFO, as deployed, whatever this process set before
    they were made (a local server sets `POWERTOOLS_LOG_LEVEL` to WARNING, read at import)."""
    services = [logger for logger in _loggers() if logger.name.startswith("waypoint-")]
    saved = [(logger, logger.level) for logger in services]
    for logger in services:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


def _loggers() -> list[logging.Logger]:
    return [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]


def report(result: TurnRequests) -> str:
    """The per-message figures, as text."""
    per = result.per_message
    lines = [
        f"{result.messages} customer messages (the banking conversation, {CUSTOMERS} customers), "
        f"measured in {result.seconds:.0f} s; per message:",
        f"  model: {per(result.llm_calls):.2f} calls, {per(result.prompt_tokens):,.0f} prompt "
        f"and {per(result.completion_tokens):,.0f} completion tokens (chars/4)",
        f"  recall embedding: {per(result.embedded_chars) / 4:,.0f} tokens (chars/4)",
        f"  tools: {per(result.tool_batches):.2f} batches (Step Functions executions), "
        f"{per(result.tool_calls):.2f} calls (tool-function invocations)",
        f"  turn queue: {per(result.queued):.2f} messages",
    ]
    for name, counts in sorted(result.functions.items()):
        calls = ", ".join(f"{op} {per(n):.2f}" for op, n in sorted(counts.calls.items()))
        lines.append(
            f"  {name}: {per(counts.invocations):.2f} invocations; {calls}; "
            f"DynamoDB {per(counts.read_units):.2f} read units, "
            f"{per(counts.write_units):.2f} write units; logs {per(counts.log_bytes):,.0f} bytes"
        )
        if counts.stored:
            stored = ", ".join(f"{kind} {per(n):,.0f}" for kind, n in counts.stored.most_common())
            lines.append(f"    bytes a turn's transaction stores, by item: {stored}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench turn-requests",
        description="What one customer message costs in AWS requests and model tokens, measured "
        "on the moto stack (the inputs of docs/deploy.md's monthly cost).",
    )
    parser.parse_args(argv)
    result = measure()
    print(report(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
