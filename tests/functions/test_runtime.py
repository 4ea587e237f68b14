"""infra.runtime: settings from the environment, secrets from SSM, the parts each Lambda needs
built lazily (and only those), publishing with embeddings first."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.toolkit import InProcessDispatcher
from examples.banking import load as load_bank
from infra.aws.s3_vectors import S3VectorIndex
from infra.aws.sfn_dispatcher import StepFunctionsDispatcher
from infra.channels.registry import DisabledChannel
from infra.offline import OfflineLLM
from infra.runtime import Runtime
from infra.runtime_settings import (
    SECRET_DIGEST_KEY_ENV,
    RuntimeConfigurationError,
    RuntimeSettings,
    parse_channel_agents,
)
from infra.turn_queue import check_session_id, session_id_for

REPO = Path(__file__).resolve().parents[2]


def test_settings_come_from_the_environment() -> None:
    settings = RuntimeSettings.from_env(
        {
            "WAYPOINT_AGENT_ID": "bank",
            "WAYPOINT_CHANNEL_AGENTS": "slack=helpdesk, telegram=bank",
            "WAYPOINT_TOOL_DISPATCH_MODE": "poll",
            "WAYPOINT_CALLBACK_HOSTS": "a.example, b.example",
            "WAYPOINT_REPLY_PER_MESSAGE": "1",
        }
    )
    assert settings.channel_agents == {"slack": "helpdesk", "telegram": "bank"}
    assert settings.tool_dispatch_mode == "poll"
    assert settings.callback_hosts == ("a.example", "b.example")
    assert settings.reply_per_message is True
    assert RuntimeSettings.from_env({}).reply_per_message is False


@pytest.mark.parametrize("raw", ["slack", "slack=", "=bank", "slack=a,,telegram"])
def test_a_malformed_channel_mapping_says_how_to_write_it(raw: str) -> None:
    with pytest.raises(RuntimeConfigurationError, match="channel=agent_id"):
        parse_channel_agents(raw)


@pytest.mark.parametrize(
    "env",
    [{"WAYPOINT_AGENT_ID": "../evil"}, {"WAYPOINT_CHANNEL_AGENTS": "slack=a/b"}],
    ids=["agent", "channel-agent"],
)
def test_an_agent_id_setting_that_breaks_the_rule_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(RuntimeConfigurationError, match="letters, digits") as caught:
        RuntimeSettings.from_env(env)
    assert next(iter(env)) in str(caught.value)


def test_a_bad_dispatch_mode_is_refused() -> None:
    with pytest.raises(RuntimeConfigurationError, match="sync"):
        RuntimeSettings.from_env({"WAYPOINT_TOOL_DISPATCH_MODE": "later"})


def test_each_channel_is_answered_by_its_agent_or_the_default() -> None:
    runtime = Runtime(RuntimeSettings(agent_id="bank", channel_agents={"slack": "helpdesk"}))
    assert (runtime.agent_for("slack"), runtime.agent_for("telegram")) == ("helpdesk", "bank")
    with pytest.raises(RuntimeConfigurationError, match="WAYPOINT_AGENT_ID"):
        Runtime(RuntimeSettings()).agent_for("slack")


def test_session_ids_are_stable_opaque_and_usable_as_sqs_group_ids() -> None:
    key = "twilio:AC123:+14155550100:whatsapp:+14155550199"
    session = session_id_for("bank", "twilio", key)
    assert session == session_id_for("bank", "twilio", key)
    assert session != session_id_for("other", "twilio", key)
    assert session != session_id_for("bank", "twilio", key + "0")
    assert "+1415" not in session  # no phone numbers in keys and logs
    assert check_session_id(session) == session
    with pytest.raises(ValueError):
        check_session_id("a b")


def test_tools_run_through_step_functions_when_a_state_machine_is_configured() -> None:
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:waypoint-tools"
    runtime = Runtime(RuntimeSettings(tool_state_machine_arn=arn, tool_dispatch_mode="poll"))
    dispatcher = runtime.tools
    assert isinstance(dispatcher, StepFunctionsDispatcher)
    assert (dispatcher.state_machine_arn, dispatcher.mode) == (arn, "poll")
    assert StepFunctionsDispatcher(arn).mode == "sync"  # the default, for AWS


def test_tools_run_in_process_from_the_registry_module_otherwise() -> None:
    runtime = Runtime(RuntimeSettings(tools_module="examples.banking.tools"))
    assert isinstance(runtime.tools, InProcessDispatcher)
    assert Runtime(RuntimeSettings()).tools is None
    with pytest.raises(RuntimeConfigurationError, match="cannot be imported"):
        _ = Runtime(RuntimeSettings(tools_module="no.such.module")).tools


def test_secrets_come_from_the_ssm_path_and_never_override_the_environment(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssm = stack.client("ssm")
    values = {
        "WAYPOINT_TELEGRAM_SECRET_TOKEN": "from-ssm-secret",
        "WAYPOINT_TELEGRAM_BOT_TOKEN": "123:from-ssm",
        "WAYPOINT_MANAGEMENT_API_KEY": "from-ssm-key",
        "PATH": "/nope",  # not a WAYPOINT_/OPENAI_ name: ignored
    }
    for name, value in values.items():
        ssm.put_parameter(Name=f"/waypoint/test/{name}", Value=value, Type="SecureString")
    monkeypatch.setenv("WAYPOINT_MANAGEMENT_API_KEY", "from-env")
    exported = [n for n in values if n != "PATH" and n not in os.environ]
    try:
        runtime = Runtime(RuntimeSettings(secrets_path="/waypoint/test"))
        telegram = runtime.channels["telegram"]
        assert not isinstance(telegram, DisabledChannel)
        key = runtime.management_api_key()
        assert key is not None and [v.get_secret_value() for v in key.values] == ["from-env"]
        assert os.environ["PATH"] != "/nope"
    finally:
        for name in exported:
            os.environ.pop(name, None)


def test_the_secret_digest_key_comes_from_the_ssm_path_to_the_engine(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "from-ssm-" + "k" * 40
    stack.client("ssm").put_parameter(
        Name=f"/waypoint/test/{SECRET_DIGEST_KEY_ENV}", Value=key, Type="SecureString"
    )
    monkeypatch.setenv(SECRET_DIGEST_KEY_ENV, "placeholder")  # recorded: the teardown removes it
    monkeypatch.delenv(SECRET_DIGEST_KEY_ENV)
    runtime = Runtime(RuntimeSettings(secrets_path="/waypoint/test"), llm=OfflineLLM(), tools=None)

    assert runtime.engine.pipeline.deps.secret_key == key.encode()
    assert key not in repr(runtime.engine.pipeline.deps)


def test_without_a_secret_digest_key_sessions_keep_no_digest_and_the_log_says_where_to_set_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Never the engine's public development key: a deployment without its own key keeps no
    digest a leaked store could test guesses against. A key too short to be one is refused."""
    monkeypatch.delenv(SECRET_DIGEST_KEY_ENV, raising=False)
    runtime = Runtime(RuntimeSettings(secrets_path="/waypoint/none"))
    monkeypatch.setattr(runtime, "_read_parameters", lambda path, names: {})

    with caplog.at_level("ERROR", logger="infra.runtime"):
        assert runtime.secret_digest_key() is None
    assert f"/waypoint/none/{SECRET_DIGEST_KEY_ENV}" in caplog.text

    monkeypatch.setenv(SECRET_DIGEST_KEY_ENV, "short")
    with pytest.raises(RuntimeConfigurationError, match="at least 32"):
        Runtime(RuntimeSettings()).secret_digest_key()


def test_publishing_writes_the_embeddings_before_the_version_pointer(
    make_runtime: Callable[..., Runtime], stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = make_runtime()

    async def refuse(snapshot: Any) -> str:
        raise ConnectionError("DynamoDB is down")

    monkeypatch.setattr(runtime.agents, "publish", refuse)
    with pytest.raises(ConnectionError):
        runtime.run(runtime.publish_agent(load_bank()))
    keys = [o["Key"] for o in stack.client("s3").list_objects_v2(Bucket=stack.bucket)["Contents"]]
    assert any(k.endswith("/manifest.json") for k in keys)  # vectors first…
    with pytest.raises(Exception, match="no published agent"):
        runtime.run(runtime.agents.get("bank"))  # …the version is not visible without them


def test_the_vector_index_is_used_only_when_embeddings_were_published(
    make_runtime: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> None:
    runtime = make_runtime()
    agent = load_bank().with_content_version()
    runtime.run(runtime.agents.publish(agent))  # published without embeddings
    assert runtime.run(runtime.index_for(agent)) is None
    assert "has no embeddings" in caplog.text

    published = runtime.run(runtime.publish_agent(load_bank()))
    assert published.version == agent.version
    fresh = Runtime(runtime.settings)
    index = runtime.run(fresh.index_for(agent))
    assert isinstance(index, S3VectorIndex)


@pytest.mark.parametrize(
    ("module", "never"),
    [
        ("functions.webhook", ("numpy", "openai", "engine.turn", "boto3", "pydantic.v1")),
        ("functions.worker", ("numpy", "openai", "engine.turn", "boto3", "fastapi")),
        ("functions.management", ("numpy", "openai", "engine.turn", "boto3")),
    ],
)
def test_handler_modules_import_only_what_every_request_needs(
    module: str, never: tuple[str, ...]
) -> None:
    """Cold start: the engine, boto3 and openai are imported by the runtime when first used."""
    code = f"import sys, {module}; print(','.join(m for m in {never!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == ""


def test_prepared_for_turns_only_a_runtime_whose_channels_send_builds_an_http_client(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prepare_for_turns` (a Lambda container's init phase) builds the engine and its clients,
    and the outbound HTTP client only when an enabled channel (or the support relay) sends."""
    quiet = Runtime(RuntimeSettings.from_env())
    quiet.prepare_for_turns()
    assert {"engine", "llm", "embedder", "outbox"} <= set(quiet.__dict__)
    assert "http" not in quiet.__dict__  # no channel secret is set: nothing to send with
    quiet.close()

    monkeypatch.setenv("WAYPOINT_GENERIC_SECRET", "generic-secret-0123456789abcdef")
    monkeypatch.setenv("WAYPOINT_CALLBACK_HOSTS", "client.test")
    sending = Runtime(RuntimeSettings.from_env())
    sending.prepare_for_turns()
    assert "http" in sending.__dict__  # the generic channel POSTs its replies
    sending.close()


def test_the_agents_a_runtime_answers_are_read_ahead_and_one_not_published_is_left_to_its_turn(
    stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = Runtime(RuntimeSettings.from_env(), llm=OfflineLLM())  # answers "bank"
    with caplog.at_level("WARNING", logger="infra.runtime"):
        runtime.prepare_for_turns()  # not published yet: logged, not raised
    assert "agent bank could not be read ahead of its first turn" in caplog.text

    runtime.run(runtime.publish_agent(load_bank()))
    assert runtime.run(runtime.read_agents_ahead()) == ["bank"]
    runtime.close()
