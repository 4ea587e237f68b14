"""The turn worker's Lambda init phase (`functions.worker_init`): in a Lambda container the import
of `functions.worker` builds the runtime, imports and connects the LLM client and freezes the
garbage collector, so the first invocation builds nothing again; a bad configuration still gives
a clear error and loses no message. Each container is a fresh Python process on the moto server,
the real `openai` client talking to a fake OpenAI-compatible server, the generic channel replying
to a local callback receiver (the cold-turn benchmark's own setup, `bench.cold_handler`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.cold_handler import _publish, callback_receiver, model_server, sqs_events, worker_env
from infra.aws.local_stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]
# What the worker's init and turns never import, though they once did (boto3's resource layer
# and s3transfer; the models of openai's other APIs; the agent-authoring package, through the
# example's tools package): ~290 ms of CPU of a cold start together. Then openai's chat and
# embeddings resources (with its streaming helpers) and its structured-output helpers: ≈ 60 ms.
# Powertools' parser models (24 pydantic models, ≈ 14 ms) were never imported: its batch
# utility imports them only when pydantic is already imported, and the worker imports the batch
# utility first; a reordering that imported pydantic before it would bring them in.
NEVER_IMPORTED = (
    "boto3",
    "s3transfer",
    "openai.types.responses.response",
    "openai.types.eval_create_params",
    "openai.resources.chat",
    "openai.resources.embeddings",
    "openai.lib.streaming",
    "openai.lib._parsing",
    "aws_lambda_powertools.utilities.parser",
    "engine.authoring",
)

# A Lambda container: counts `gc.freeze()` calls, imports the handler module (the init phase),
# then invokes the handler on each event of argv[1]; prints what it saw as one JSON line.
CONTAINER = r"""
import gc, json, os, sys

NEVER_IMPORTED = NEVER_IMPORTED_NAMES

freezes = []
_freeze = gc.freeze
def counting_freeze():
    freezes.append(len(freezes))
    _freeze()
gc.freeze = counting_freeze

import functions.worker as worker
from infra import runtime as runtime_module

initialized = runtime_module._current
parts = ("engine", "llm", "embedder", "agents", "sessions", "outbox", "http")
made = initialized.__dict__ if initialized is not None else {}  # None: the settings failed
built = {name: id(made[name]) for name in parts if name in made}
from infra.aws import dynamo_agents, s3_vectors
after_init = {
    "built": sorted(built),
    "gc_enabled": gc.isenabled(),
    "frozen_objects": gc.get_freeze_count(),
    "freezes": len(freezes),
    "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    "snapshots_read": len(dynamo_agents.WARM_SNAPSHOTS._entries),
    "indexes_read": len(s3_vectors._WARM),
    "unneeded": [name for name in NEVER_IMPORTED if name in sys.modules],
}

class Context:
    function_name = "waypoint-test-worker"
    aws_request_id = "test"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:waypoint-test-worker"
    memory_limit_in_mb = 1024
    def get_remaining_time_in_millis(self):
        return 120_000

events = json.load(open(sys.argv[1]))
before = set(sys.modules)
responses, errors = [], []
for event in events:
    try:
        responses.append(worker.handler(event, Context()))
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
imported = sorted(set(sys.modules) - before)
current = runtime_module._current
print(json.dumps({
    "after_init": after_init,
    "responses": responses,
    "errors": errors,
    "openai_imported": [m for m in imported if m.split(".")[0] == "openai"],
    "same_runtime": current is initialized,
    "same_parts": current is not None
        and all(id(current.__dict__.get(name)) == ref for name, ref in built.items()),
    "freezes": len(freezes),
    "gc_enabled": gc.isenabled(),
    "unneeded": [name for name in NEVER_IMPORTED if name in sys.modules],
}))
"""


class Container:
    """Runs fresh worker processes against the stack, the model server and the callbacks."""

    def __init__(self, stack: LocalStack, base_url: str, callback_url: str, tmp: Path) -> None:
        self.stack, self.base_url, self.callback_url, self.tmp = stack, base_url, callback_url, tmp
        self.publisher = _publish(base_url)

    def events(self, prefix: str, turns: int) -> list[dict[str, Any]]:
        return sqs_events(self.publisher, prefix, turns, self.callback_url)

    def run(self, events: list[dict[str, Any]], **env: str) -> tuple[dict[str, Any], str]:
        """One cold container over `events`: its JSON line, and everything it printed (logs)."""
        path = self.tmp / "events.json"
        path.write_text(json.dumps(events), encoding="utf-8")
        environment = worker_env(dict(self.stack.env), self.base_url, str(self.tmp / "cache"))
        environment.update(env)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CONTAINER.replace("NEVER_IMPORTED_NAMES", repr(NEVER_IMPORTED)),
                str(path),
            ],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1]), done.stdout + done.stderr

    def in_flight(self) -> int:
        """Messages received from the queue and neither deleted nor visible again yet."""
        attributes = self.publisher.sqs.get_queue_attributes(
            QueueUrl=self.publisher.queue_url,
            AttributeNames=["ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    with (
        LocalStack(server=True) as stack,
        model_server() as (base_url, _timer),
        callback_receiver() as callback_url,
    ):
        made = Container(stack, base_url, callback_url, tmp_path_factory.mktemp("container"))
        try:
            yield made
        finally:
            made.publisher.close()


@pytest.fixture(autouse=True)
def environment() -> None:
    """These tests configure each container's environment themselves (`worker_env`)."""


def test_after_init_the_first_invocation_neither_imports_openai_nor_builds_the_runtime_again(
    container: Container,
) -> None:
    seen, _ = container.run(container.events("init-ok", 2))

    after_init = seen["after_init"]
    # The init phase built everything a turn needs, the generic channel's HTTP client included.
    assert set(after_init["built"]) == {
        "engine", "llm", "embedder", "agents", "sessions", "outbox", "http"
    }  # fmt: skip
    assert after_init["freezes"] == 1 and after_init["frozen_objects"] > 10_000
    assert after_init["gc_enabled"]  # paused during the init only
    assert after_init["blas_threads"] == "1"  # set before numpy was imported
    # The banking agent (WAYPOINT_AGENT_ID) was read ahead: its snapshot and vectors are warm.
    assert after_init["snapshots_read"] == 1 and after_init["indexes_read"] == 1
    # Both invocations answered, on the runtime and clients the init built.
    assert seen["errors"] == []
    assert seen["responses"] == [{"batchItemFailures": []}] * 2
    assert seen["same_runtime"] and seen["same_parts"]
    assert seen["openai_imported"] == []
    assert seen["freezes"] == 1 and seen["gc_enabled"]
    # Nor what a turn does not need, at init or in the invocations.
    assert after_init["unneeded"] == [] and seen["unneeded"] == []


def test_a_bad_part_of_the_configuration_fails_the_records_with_a_clear_error_and_keeps_them(
    container: Container,
) -> None:
    events = container.events("init-bad-key", 1)
    in_flight = container.in_flight()

    seen, printed = container.run(events, WAYPOINT_SECRET_DIGEST_KEY="too-short")

    # The init logged what to fix, and did not fail the import...
    assert "the worker's init failed" in printed
    assert "WAYPOINT_SECRET_DIGEST_KEY is 9 characters long" in printed
    assert seen["after_init"]["freezes"] == 1 and seen["after_init"]["gc_enabled"]
    # ...and the record comes back to SQS: a batch item failure, never deleted.
    (record,) = events[0]["Records"]
    assert seen["responses"] == [{"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}]
    assert container.in_flight() == in_flight  # still there, visible again after the timeout


def test_unreadable_settings_fail_the_whole_invocation_so_lambda_retries_the_batch(
    container: Container,
) -> None:
    events = container.events("init-bad-settings", 1)

    seen, printed = container.run(events, WAYPOINT_TOOL_DISPATCH_MODE="sometimes")

    assert "the worker's init failed" in printed
    assert "WAYPOINT_TOOL_DISPATCH_MODE" in printed
    assert seen["responses"] == []
    (error,) = seen["errors"]
    assert error.startswith("RuntimeConfigurationError") and "WAYPOINT_TOOL_DISPATCH_MODE" in error
    assert seen["after_init"]["freezes"] == 1 and seen["gc_enabled"]


def test_without_a_lambda_container_the_worker_builds_nothing_at_import() -> None:
    """Tests, the CLI and the local server: the runtime is built on the first record, as before."""
    code = (
        "import gc, json, functions.worker\n"
        "import os\n"
        "from infra import runtime\n"
        "print(json.dumps([runtime._current is None, gc.get_freeze_count(), gc.isenabled(),\n"
        "                  os.environ.get('OPENBLAS_NUM_THREADS')]))"
    )
    env = {k: v for k, v in worker_env({}, "http://127.0.0.1:9/v1", "/tmp").items()}
    env.pop("AWS_LAMBDA_FUNCTION_NAME")
    env.pop("OPENBLAS_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, 0, True, None]
