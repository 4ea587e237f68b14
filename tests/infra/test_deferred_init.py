"""`infra.deferred_init` imports a package whose `__init__` only re-exports its submodules without
running that `__init__` until something needs it: the turn worker defers Powertools' event
classes (`POWERTOOLS_EVENT_CLASSES`). The premise is checked on the installed Powertools, the
same names and objects are read either way, and the batch utility the worker uses imports only
the classes it reads. (`openai.types`: tests/infra/test_openai_import.py.)

Each import check runs in a fresh interpreter: in this one the package may already be imported."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from infra.deferred_init import POWERTOOLS_EVENT_CLASSES, defer_init

REPO = Path(__file__).resolve().parents[2]


def _init_file(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin)


def _run(code: str, stdin: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_event_classes_init_only_reexports_its_own_submodules() -> None:
    """The premise of deferring it: running it later defines nothing that reading its
    submodules does not (no code, no import from outside the package; `__all__` lists)."""
    offenders = []
    init = _init_file(POWERTOOLS_EVENT_CLASSES)
    body = ast.parse(init.read_text(encoding="utf-8")).body
    for node in body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        own = isinstance(node, ast.ImportFrom) and node.level == 1
        listing = (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["__all__"]
            and isinstance(node.value, ast.List | ast.Tuple)
        )
        if not (docstring or own or listing):
            offenders.append(f"{init}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert sum(isinstance(node, ast.ImportFrom) for node in body) > 20  # the layout deferred
    assert offenders == []


_NAMES = """
import importlib, json, sys
from infra.deferred_init import POWERTOOLS_EVENT_CLASSES, defer_init
if MODE != "eager":
    assert defer_init(POWERTOOLS_EVENT_CLASSES)
eager = json.loads(sys.stdin.read() or "{}")
module = importlib.import_module(POWERTOOLS_EVENT_CLASSES)

def described(value):
    return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', repr(value))}"

if MODE == "by name":  # each name read alone, as `from package import Name` reads it
    names = {name: described(getattr(module, name)) for name in eager}
else:
    names = {name: described(getattr(module, name)) for name in module.__all__}
print(json.dumps(names))
"""


def test_the_deferred_package_reads_the_same_names_as_the_eager_import() -> None:
    eager = json.loads(_run(_NAMES.replace("MODE", "'eager'")))
    assert eager["SQSRecord"].endswith("sqs_event.SQSRecord")
    for mode in ("by name", "whole"):
        deferred = json.loads(_run(_NAMES.replace("MODE", repr(mode)), json.dumps(eager)))
        assert deferred == eager, mode


_BATCH = """
import sys
from infra.deferred_init import POWERTOOLS_EVENT_CLASSES, defer_init
DEFER
from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor, process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
loaded = [m for m in sys.modules if m.startswith(POWERTOOLS_EVENT_CLASSES + ".")]
seen = []
def handle(record: SQSRecord) -> None:
    seen.append(record.body)
    if record.body == "bad":
        raise ValueError("bad")
def record(n, body, group):
    return {"messageId": f"m{n}", "receiptHandle": "r", "body": body, "attributes": {
        "MessageGroupId": group, "ApproximateReceiveCount": "1", "SentTimestamp": "1",
        "SenderId": "s", "ApproximateFirstReceiveTimestamp": "1",
        "SequenceNumber": str(n), "MessageDeduplicationId": f"d{n}"},
        "messageAttributes": {}, "md5OfBody": "x", "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:1:q.fifo", "awsRegion": "us-east-1"}
event = {"Records": [record(1, "a", "g1"), record(2, "bad", "g2"), record(3, "c", "g2"),
                     record(4, "d", "g1")]}
response = process_partial_response(
    event=event, record_handler=handle,
    processor=SqsFifoPartialProcessor(skip_group_on_error=True), context=None)
print(len(loaded), seen, sorted(f["itemIdentifier"] for f in response["batchItemFailures"]))
"""


def test_the_batch_utility_imports_only_the_event_classes_it_reads() -> None:
    eager = _run(_BATCH.replace("DEFER", "")).split(" ", 1)
    deferred = _run(_BATCH.replace("DEFER", "defer_init(POWERTOOLS_EVENT_CLASSES)")).split(" ", 1)
    assert deferred[1] == eager[1]  # the same records handled, the same failures reported
    assert "['m2', 'm3']" in deferred[1]
    assert int(deferred[0]) < int(eager[0]) // 2


def test_the_worker_defers_the_event_classes() -> None:
    code = (
        "import sys, functions.worker\n"
        f"print(len([m for m in sys.modules if m.startswith({POWERTOOLS_EVENT_CLASSES!r})]))"
    )
    assert int(_run(code)) < 15  # the package and the few modules the worker reads


def test_a_package_already_imported_stays_as_it_is() -> None:
    import email

    assert defer_init("email") is False
    assert email.message_from_string("Subject: hi\n\n").get("subject") == "hi"
