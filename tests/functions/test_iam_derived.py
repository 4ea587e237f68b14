"""Each function gets exactly the permissions its code paths need, derived rather than listed.

The handlers run their code paths on moto (every channel, duplicates, a failed enqueue, turns,
deliveries, tool calls, publishing, the management routes, sessions whose bodies live in S3),
each as the function that runs it in AWS, under that function's policy from template.yaml
(after the SAM transform): a call the policy does not allow is refused with AccessDenied, as
AWS would. Then every recorded call must have been allowed, and every grant must have been used.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.errors import LLMTransientError
from engine.ports import ToolCall, ToolContext
from engine.sessions.session import EventSource, SessionState
from infra.aws.lambda_routing import LambdaRouter, create_tool_state_machine
from infra.channels import registry
from infra.runtime import Runtime, install_runtime, reset_runtime
from infra.runtime_settings import (
    ENGINE_SECRET_NAMES,
    LLM_SECRET_NAMES,
    MANAGEMENT_SECRET_NAMES,
    SECRET_DIGEST_KEY_ENV,
    RuntimeSettings,
)
from infra.turn_queue import session_id_for
from tests.channels.payloads import (
    generic_message,
    slack_event,
    tg_text_update,
    twilio_sms,
    wa_change,
    wa_notification,
    wa_text,
)
from tests.channels.signed import PUBLIC_BASE_URL, channel_secrets
from tests.contracts.factories import turn_commit
from tests.functions import signed_events as signed
from tests.functions.conftest import (
    invoke_management,
    invoke_webhook,
    invoke_worker,
    receive_all,
)
from tests.functions.iam_policy import (
    CallRecorder,
    Policy,
    forget_clients,
    function_policies,
    recording,
)
from tests.functions.lambda_events import http_event, records_from_queue, sqs_event
from tests.functions.platforms import BASE_URLS, CALLBACK_URL, FakePlatforms, resolve_to_public
from tests.functions.test_template import transformed  # noqa: F401  (the module fixture)
from tests.infra.test_dead_letters import customer_message

SECRETS_PATH = "/waypoint/dev"  # the template's default
MANAGEMENT_KEY = "derived-management-key-0123456789"
BANK_YAML = Path(__file__).resolve().parents[2] / "examples" / "banking" / "agent.yaml"
OPENAI_KEY = "sk-derived-test-never-used"
DIGEST_KEY = "derived-secret-digest-key-0123456789abcdef"


@pytest.fixture
def policies(transformed: dict[str, Any], stack: Any) -> dict[str, Policy]:  # noqa: F811
    return function_policies(transformed, stack)


@pytest.fixture
def secrets_in_ssm(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every secret lives in the SSM path, none in the environment; what the functions export
    from it is undone after the test."""
    values = {
        registry.ChannelSecrets.env_var(name): secret.get_secret_value()
        for name, secret in channel_secrets().model_dump().items()
        if secret is not None
    } | {
        "WAYPOINT_MANAGEMENT_API_KEY": MANAGEMENT_KEY,
        "OPENAI_API_KEY": OPENAI_KEY,
        SECRET_DIGEST_KEY_ENV: DIGEST_KEY,
    }
    ssm = stack.client("ssm")
    for name, value in values.items():
        ssm.put_parameter(Name=f"{SECRETS_PATH}/{name}", Value=value, Type="SecureString")
    every = (
        *registry.ChannelSecrets.env_names(),
        *LLM_SECRET_NAMES,
        *MANAGEMENT_SECRET_NAMES,
        *ENGINE_SECRET_NAMES,
    )
    for name in every:
        monkeypatch.setenv(name, "placeholder")  # recorded, so the teardown removes it again
        monkeypatch.delenv(name)
    monkeypatch.setenv("WAYPOINT_SECRETS_PATH", SECRETS_PATH)
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "offline")  # a deploy-time parameter
    monkeypatch.setenv("WAYPOINT_PUBLIC_BASE_URL", PUBLIC_BASE_URL)
    monkeypatch.setenv("WAYPOINT_CALLBACK_HOSTS", "client.test")
    # The platforms' APIs are the fake ones; everything else about the channels is as deployed.
    monkeypatch.setattr(
        registry,
        "build_channels",
        functools.partial(
            registry.build_channels, base_urls=BASE_URLS, callback_resolver=resolve_to_public
        ),
    )


@pytest.fixture
def recorder(
    policies: dict[str, Policy], stack: Any, secrets_in_ssm: None
) -> Iterator[CallRecorder]:
    with recording(policies, stack.region, enforce=True) as active:
        yield active
    reset_runtime()


def container(platforms: FakePlatforms, **settings: Any) -> Runtime:
    """A cold container: a runtime built from the environment, as Lambda starts one."""
    forget_clients()
    chosen = dataclasses.replace(RuntimeSettings.from_env(), **settings)
    return install_runtime(Runtime(chosen, http=httpx.AsyncClient(transport=platforms.transport())))


def management(method: str, path: str, body: bytes = b"", **options: Any) -> dict[str, Any]:
    headers = {"content-type": options.pop("content_type", "application/json")}
    headers["x-api-key"] = MANAGEMENT_KEY
    return invoke_management(http_event(method, path, body=body, headers=headers, **options))


def seed_session_with_body_in_s3(runtime: Runtime, chat: int) -> str:
    """A Telegram conversation's session whose META body is offloaded to S3 (a big, incompressible
    metadata value), written by the test itself, outside any function's window."""
    telegram = runtime.channels["telegram"]
    bot_id = telegram.bot_id  # type: ignore[union-attr]
    session_id = session_id_for("bank", "telegram", f"tg:{bot_id}:{chat}")
    big = base64.b64encode(os.urandom(450_000)).decode()
    state = SessionState(
        id=session_id,
        agent_id="bank",
        customer_id=str(chat),
        channel="telegram",
        metadata={"account_id": bot_id, "notes": big},
    )
    runtime.run(runtime.sessions.create(state))
    return session_id


def seed_customer_message(runtime: Runtime, session_id: str, chat: int) -> None:
    """A message the customer sent in the session (so erasing them looks up its inbox claim)."""
    state = runtime.run(runtime.sessions.load(session_id))
    assert state is not None
    commit = turn_commit(state, f"seeded-{chat}", "hello")
    (reply,) = commit.new_events
    said = reply.model_copy(
        update={
            "source": EventSource.CUSTOMER,
            "data": {"channel_event_id": f"telegram:bot:{chat}:1", "sender": str(chat)},
        }
    )
    runtime.run(
        runtime.sessions.commit(
            dataclasses.replace(
                commit,
                new_events=(said,),
                state=commit.state.model_copy(update={"events": (said,)}),
            )
        )
    )


def seed_dead_letters(stack: Any, session_id: str, chat: int) -> None:
    """What failed turns leave in the turn DLQ (written by the test: SQS's redrive, not a
    function): someone else's message on the customer's channel ahead of theirs in a group,
    theirs, and a message of another channel."""
    group = session_id_for("bank", "telegram", "tg:group:1")
    for channel, sender, session in (
        ("telegram", "99", group),
        ("telegram", str(chat), group),
        ("telegram", str(chat), session_id),
        ("slack", str(chat), "slack-elsewhere"),
    ):
        stack.client("sqs").send_message(
            QueueUrl=stack.dead_letter_queue_url,
            MessageBody=customer_message(channel, sender, "failed", session),
            MessageGroupId=session,
            MessageDeduplicationId=f"{session}-{sender}",
        )


def run_every_code_path(
    recorder: CallRecorder, stack: Any, platforms: FakePlatforms, tool_machine: str
) -> str:
    """Each function's code paths, each as that function. Returns the seeded session's id."""
    # Publishing asks the deployed tool function for its registry (`WAYPOINT_TOOL_FUNCTION`):
    # the function exists under the name the policy's ARN names, routed to the real handler.
    from functions import tool_task

    create_tool_state_machine(
        stack.client("stepfunctions"),
        stack.client("lambda"),
        iam=stack.client("iam"),
        function_name="ToolFunction",
        state_machine_name="describe-tools",
    )
    os.environ["WAYPOINT_TOOL_FUNCTION"] = "ToolFunction"
    try:
        with (
            LambdaRouter({"ToolFunction": tool_task.handler}) as router,
            recorder.acting_as("ManagementFunction"),
        ):
            container(platforms, tool_state_machine_arn=tool_machine)
            published = management(
                "POST", "/agents", BANK_YAML.read_bytes(), content_type="application/yaml"
            )
            assert published["statusCode"] == 201, published["body"]
        assert [i.event for i in router.invocations_of("ToolFunction")] == [{"describe": "tools"}]
    finally:
        del os.environ["WAYPOINT_TOOL_FUNCTION"]
    with recorder.acting_as("ManagementFunction"):
        assert management("GET", "/agents/bank")["statusCode"] == 200
        created = management("POST", "/sessions", b'{"customer_id": "w1", "session_id": "web-1"}')
        assert created["statusCode"] == 201, created["body"]
        turn = management("POST", "/sessions/web-1/messages", b'{"text": "hi", "event_id": "m1"}')
        assert turn["statusCode"] == 200, turn["body"]
        assert management("GET", "/sessions/web-1/events")["statusCode"] == 200
        assert management("GET", "/sessions/web-1/traces/unknown")["statusCode"] == 404
        queued = management(
            "POST",
            "/sessions/web-1/messages",
            b'{"text": "x", "event_id": "m2"}',
            query={"async": "1"},
        )
        assert queued["statusCode"] == 202, queued["body"]

    # Outside every window: the test's own setup.
    setup = container(platforms)
    seeded = seed_session_with_body_in_s3(setup, chat=4242)
    forgotten = seed_session_with_body_in_s3(setup, chat=4343)  # erased below
    seed_customer_message(setup, forgotten, chat=4343)

    with recorder.acting_as("WebhookFunction"):
        # A cold container gets a message for a session whose body is in S3 (issue #14: this
        # read the whole session back → AccessDenied → 503 on every retry).
        container(platforms)
        response = invoke_webhook(signed.telegram(tg_text_update("hi", update_id=1, chat_id=4242)))
        assert response["statusCode"] == 200, response["body"]
        for request in (
            signed.slack(slack_event("hi")),
            signed.whatsapp(wa_notification(wa_change(messages=[wa_text("hi")]))),
            signed.twilio(twilio_sms("hi")),
            signed.generic(generic_message(callback_url=CALLBACK_URL)),
        ):
            response = invoke_webhook(request)
            assert response["statusCode"] == 200, response["body"]
        duplicate = invoke_webhook(signed.twilio(twilio_sms("hi")))
        assert duplicate["statusCode"] == 200
        recorder.fail_next("SendMessage")  # the enqueue fails: the claim is released
        failed = invoke_webhook(signed.telegram(tg_text_update("x", update_id=2, chat_id=7)))
        assert failed["statusCode"] == 503

    # The event source mapping receives and deletes (the Lambda service's role, not the
    # function's): only the worker's invocations run as the worker.
    worker = container(platforms, tool_state_machine_arn=tool_machine)
    messages = receive_all(stack)
    assert len(messages) == 6
    for start in range(0, len(messages), 10):
        with recorder.acting_as("WorkerFunction"):
            response = invoke_worker(sqs_event(records_from_queue(messages[start : start + 10])))
        assert response["batchItemFailures"] == [], response
    with recorder.acting_as("WorkerFunction"):
        # The tool calls of a turn (StartSyncExecution; moto answers it as a failed execution).
        assert worker.tools is not None
        context = ToolContext(agent_id="bank", session_id=seeded, customer_id="4242", turn_id="t")
        call = ToolCall(id="c1", tool="get_balance", arguments={}, idempotency_key="s:t:0")
        (outcome,) = worker.run(worker.tools.dispatch([call], context))
        assert outcome.error

    with recorder.acting_as("ManagementFunction"):
        manager = container(platforms, tool_state_machine_arn=tool_machine)
        assert management("GET", f"/sessions/{seeded}")["statusCode"] == 200
        turn = management(
            "POST", f"/sessions/{seeded}/messages", b'{"text": "more", "event_id": "m3"}'
        )
        assert turn["statusCode"] == 200, turn["body"]  # its body is written back to S3
        assert manager.tools is not None  # a synchronous turn's tool calls
        (outcome,) = manager.run(manager.tools.dispatch([call], context))
        assert outcome.error
        # Erasing a customer deletes their session, its S3 bodies, its inbox claims and their
        # dead letters (looking behind someone else's, holding another channel's).
        seed_dead_letters(stack, forgotten, chat=4343)
        erased = management("DELETE", "/customers/telegram/4343")
        assert erased["statusCode"] == 200, erased["body"]
        assert forgotten in erased["body"]

    with recorder.acting_as("ToolFunction"):
        from functions import tool_task

        tool_task.handler({"call": {"id": "c1", "tool": "nope", "arguments": {}}, "context": {}})

    run_the_handoff_paths(recorder, stack, platforms, tool_machine, seeded)
    run_a_message_queued_before_its_sender_was_erased(recorder, stack, platforms, tool_machine)
    run_a_turn_the_rate_limited_model_defers(recorder, stack, platforms, tool_machine)
    return seeded


class RateLimitedModel:
    """The model adapter as it fails when the provider's quota is used up: a 429, every call."""

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Any:
        raise LLMTransientError("429 Rate limit reached", status=429, retry_after=0.01)


def run_a_turn_the_rate_limited_model_defers(
    recorder: CallRecorder, stack: Any, platforms: FakePlatforms, tool_machine: str
) -> None:
    """The model stays rate-limited: the worker gives the record back with its back-off
    (ChangeMessageVisibility) and notes the "one moment" line on the message's inbox claim."""
    container(platforms)
    update = tg_text_update("hi", update_id=92, chat_id=6363, user_id=6363)
    assert invoke_webhook(signed.telegram(update))["statusCode"] == 200
    pending = receive_all(stack)
    assert len(pending) == 1
    with recorder.acting_as("WorkerFunction"):
        forget_clients()
        settings = dataclasses.replace(
            RuntimeSettings.from_env(),
            tool_state_machine_arn=tool_machine,
            one_moment_after_seconds=0,
        )
        http = httpx.AsyncClient(transport=platforms.transport())
        install_runtime(Runtime(settings, llm=RateLimitedModel(), http=http))
        response = invoke_worker(sqs_event(records_from_queue(pending)))
        assert len(response["batchItemFailures"]) == 1, response
    operations = [call.operation for call, _ in recorder.requests("WorkerFunction")]
    assert "ChangeMessageVisibility" in operations


def run_a_message_queued_before_its_sender_was_erased(
    recorder: CallRecorder, stack: Any, platforms: FakePlatforms, tool_machine: str
) -> None:
    """A customer writes and is erased before the worker runs their message: the worker finds
    their session gone and looks for their erasure (under the keyed digest) before recreating
    it."""
    container(platforms)
    update = tg_text_update("hi", update_id=91, chat_id=6262, user_id=6262)
    queued = invoke_webhook(signed.telegram(update))
    assert queued["statusCode"] == 200, queued["body"]
    assert management("DELETE", "/customers/telegram/6262")["statusCode"] == 200
    pending = receive_all(stack)
    assert len(pending) == 1
    with recorder.acting_as("WorkerFunction"):
        container(platforms, tool_state_machine_arn=tool_machine)
        response = invoke_worker(sqs_event(records_from_queue(pending)))
        assert response["batchItemFailures"] == [], response


def run_the_handoff_paths(
    recorder: CallRecorder, stack: Any, platforms: FakePlatforms, tool_machine: str, seeded: str
) -> None:
    """A person takes the seeded Telegram session; no one picks it up in time: the sweep records
    a ticket and queues the notice, which the worker delivers."""
    from datetime import timedelta

    from functions.handoff_sweep import sweep

    with recorder.acting_as("ManagementFunction"):
        container(platforms)
        started = management("POST", f"/sessions/{seeded}/handoff", b'{"reason": "r", "by": "op"}')
        assert started["statusCode"] == 201, started["body"]
        assert management("GET", "/handoffs")["statusCode"] == 200
    # Another customer asks for a person (outside every window; the seeded session's queue group
    # still has a message in flight): the handoff learns where to answer them.
    setup = container(platforms, tool_state_machine_arn=tool_machine)
    asked = invoke_webhook(
        signed.telegram(tg_text_update("can I talk to a person", update_id=90, chat_id=5151))
    )
    assert asked["statusCode"] == 200, asked["body"]
    pending = receive_all(stack)
    assert len(pending) == 1
    assert invoke_worker(sqs_event(records_from_queue(pending)))["batchItemFailures"] == []
    sqs = stack.client("sqs")  # done: deleted, so its FIFO group takes the next message
    sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=pending[0]["ReceiptHandle"])
    with recorder.acting_as("HandoffSweepFunction"):
        swept = container(platforms)
        later = setup.clock.now() + timedelta(days=1)
        assert swept.run(sweep(swept, later))["notices_queued"] >= 1
    notices = receive_all(stack)  # (the event source mapping's part, not the function's)
    assert notices
    with recorder.acting_as("WorkerFunction"):
        container(platforms, tool_state_machine_arn=tool_machine)
        response = invoke_worker(sqs_event(records_from_queue(notices)))
        assert response["batchItemFailures"] == [], response


@pytest.fixture
def exercised(
    recorder: CallRecorder, stack: Any, platforms: FakePlatforms, policies: dict[str, Policy]
) -> CallRecorder:
    machine = policies["WorkerFunction"].statements  # the ARN the template grants
    (arn,) = {r for s in machine for r in s.resources if ":states:" in r}
    run_every_code_path(recorder, stack, platforms, arn)
    return recorder


def test_every_aws_call_a_function_makes_is_allowed_by_its_policy(
    exercised: CallRecorder, policies: dict[str, Policy]
) -> None:
    for function, policy in policies.items():
        denied = [
            f"{call.operation} → {request.action} on {request.resource} {request.leading_keys}"
            for call, request in exercised.requests(function)
            if not policy.allows(request)
        ]
        assert denied == [], f"{function} lacks permissions for: {denied}"


def test_every_permission_a_function_has_is_used_by_one_of_its_code_paths(
    exercised: CallRecorder, policies: dict[str, Policy]
) -> None:
    for function, policy in policies.items():
        requests = [request for _, request in exercised.requests(function)]
        unused = [
            f"{statement.sid}: {action} on {resource}"
            for statement, action, resource in policy.grants()
            if not any(
                statement.allows(r)
                and r.action.lower() == action.lower()
                and _same_resource(r.resource, resource)
                for r in requests
            )
        ]
        assert unused == [], f"{function} is granted what no code path uses: {unused}"


def _same_resource(resource: str, pattern: str) -> bool:
    from tests.functions.iam_policy import _glob

    return _glob(resource, pattern)


def test_the_webhook_reads_only_channel_secrets_and_deletes_only_inbox_claims(
    stack: Any, policies: dict[str, Policy]
) -> None:
    from tests.functions.iam_policy import IamRequest

    webhook = policies["WebhookFunction"]
    region = "us-east-1"
    parameter = f"arn:aws:ssm:{region}:123456789012:parameter{SECRETS_PATH}/"
    for name in (*LLM_SECRET_NAMES, *MANAGEMENT_SECRET_NAMES, *ENGINE_SECRET_NAMES):
        assert not webhook.allows(IamRequest("ssm:GetParameters", parameter + name))
    table = stack.client("dynamodb").describe_table(TableName=stack.table_name)["Table"]["TableArn"]
    for pk in ("SESSION#web-1", "AGENT#bank", "OUTBOX#x", "VARS#bank#c"):
        assert not webhook.allows(IamRequest("dynamodb:DeleteItem", table, (pk,)))
    assert webhook.allows(IamRequest("dynamodb:DeleteItem", table, ("INBOX#telegram#1",)))
    worker = policies["WorkerFunction"]
    assert not worker.allows(
        IamRequest("ssm:GetParameters", parameter + "WAYPOINT_MANAGEMENT_API_KEY")
    )
    manager = policies["ManagementFunction"]
    assert not manager.allows(
        IamRequest("ssm:GetParameters", parameter + "WAYPOINT_SLACK_BOT_TOKEN")
    )
