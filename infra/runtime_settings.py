"""The runtime's non-secret configuration, read once from the environment (`infra.runtime`).

The variables are listed in `infra.runtime`'s docstring; a setting that is missing or malformed
raises `RuntimeConfigurationError` naming it, when the part that needs it is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from engine.errors import WaypointError
from infra.channels.support_channel import SupportRelay, SupportRelayConfigError

if TYPE_CHECKING:
    from engine.toolkit import ToolRegistry

AGENT_ID_ENV = "WAYPOINT_AGENT_ID"
CHANNEL_AGENTS_ENV = "WAYPOINT_CHANNEL_AGENTS"
TOOLS_MODULE_ENV = "WAYPOINT_TOOLS_MODULE"
TOOL_STATE_MACHINE_ENV = "WAYPOINT_TOOL_STATE_MACHINE_ARN"  # = infra.aws.sfn_dispatcher's
TOOL_DISPATCH_MODE_ENV = "WAYPOINT_TOOL_DISPATCH_MODE"
PUBLIC_BASE_URL_ENV = "WAYPOINT_PUBLIC_BASE_URL"
CALLBACK_HOSTS_ENV = "WAYPOINT_CALLBACK_HOSTS"
SECRETS_PATH_ENV = "WAYPOINT_SECRETS_PATH"
# How long a warm container trusts the secrets it read from the secrets path before reading them
# again, so each step of a key rotation reaches it within that time (docs/deploy.md).
SECRETS_MAX_AGE_ENV = "WAYPOINT_SECRETS_MAX_AGE_SECONDS"
DEFAULT_SECRETS_MAX_AGE_SECONDS = 60.0
REPLY_PER_MESSAGE_ENV = "WAYPOINT_REPLY_PER_MESSAGE"
# What a turn does when the model is still rate-limited after its retries (a 429): `defer` gives
# the messages back to the queue with a back-off, commits nothing and answers later (the turn
# worker, `functions.worker_backpressure`); `fallback` answers with the fallback reply at once.
MODEL_RATE_LIMIT_ENV = "WAYPOINT_ON_MODEL_RATE_LIMIT"
ModelRateLimitMode = Literal["defer", "fallback"]
# How long a deferred message may wait before its customer gets the "one moment" line (once).
ONE_MOMENT_AFTER_ENV = "WAYPOINT_ONE_MOMENT_AFTER_SECONDS"
DEFAULT_ONE_MOMENT_AFTER_SECONDS = 8.0
MANAGEMENT_API_KEY_ENV = "WAYPOINT_MANAGEMENT_API_KEY"
# The key of the digests sessions keep of their secrets (`engine.privacy.digests`).
SECRET_DIGEST_KEY_ENV = "WAYPOINT_SECRET_DIGEST_KEY"
MIN_SECRET_DIGEST_KEY_CHARS = 32

# The secrets each part reads from the secrets path (template.yaml grants each function exactly
# the parameters of the parts it uses; tests/functions/test_iam_derived.py checks it).
LLM_SECRET_NAMES = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
MANAGEMENT_SECRET_NAMES = (MANAGEMENT_API_KEY_ENV,)
ENGINE_SECRET_NAMES = (SECRET_DIGEST_KEY_ENV,)  # every function that runs turns


class RuntimeConfigurationError(WaypointError):
    """A setting the requested part needs is missing or malformed; the message names it."""


# --------------------------------------------------------------------------------------------------
# Settings


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def parse_channel_agents(raw: str | None) -> dict[str, str]:
    """`telegram=bank, slack=helpdesk` → {"telegram": "bank", "slack": "helpdesk"}."""
    agents: dict[str, str] = {}
    for item in (raw or "").split(","):
        if not item.strip():
            continue
        channel, sep, agent = item.partition("=")
        if not sep or not channel.strip() or not agent.strip():
            raise RuntimeConfigurationError(
                f"{CHANNEL_AGENTS_ENV}: {item.strip()!r} is not `channel=agent_id` "
                "(example: telegram=bank,slack=helpdesk)"
            )
        agents[channel.strip()] = _setting_agent_id(agent.strip(), CHANNEL_AGENTS_ENV)
    return agents


def _setting_agent_id(value: str, setting: str) -> str:
    from engine.agent_id import agent_id_problem

    problem = agent_id_problem(value)
    if problem is not None:
        raise RuntimeConfigurationError(f"{setting}: {problem}")
    return value


@dataclass(frozen=True)
class RuntimeSettings:
    """The non-secret configuration, read once from the environment."""

    agent_id: str | None = None
    channel_agents: dict[str, str] = field(default_factory=dict)
    tools_module: str | None = None
    tool_state_machine_arn: str | None = None
    tool_dispatch_mode: Literal["sync", "poll"] | None = None
    public_base_url: str | None = None
    callback_hosts: tuple[str, ...] | None = None
    secrets_path: str | None = None
    secrets_max_age_seconds: float = DEFAULT_SECRETS_MAX_AGE_SECONDS
    reply_per_message: bool = False
    on_model_rate_limit: ModelRateLimitMode = "defer"
    one_moment_after_seconds: float = DEFAULT_ONE_MOMENT_AFTER_SECONDS
    # The Slack support channel and who may write to customers from it (None: no relay).
    support_relay: SupportRelay | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        env = os.environ if environ is None else environ
        mode = (env.get(TOOL_DISPATCH_MODE_ENV) or "").strip().lower() or None
        if mode not in (None, "sync", "poll"):
            raise RuntimeConfigurationError(
                f"{TOOL_DISPATCH_MODE_ENV} must be 'sync' (AWS) or 'poll' (moto), got {mode!r}"
            )
        hosts = env.get(CALLBACK_HOSTS_ENV)
        on_rate_limit = (env.get(MODEL_RATE_LIMIT_ENV) or "").strip().lower() or "defer"
        if on_rate_limit not in ("defer", "fallback"):
            raise RuntimeConfigurationError(
                f"{MODEL_RATE_LIMIT_ENV} must be 'defer' (answer later, the default) or "
                f"'fallback' (answer with the fallback reply), got {on_rate_limit[:20]!r}"
            )
        return cls(
            agent_id=(
                _setting_agent_id(env[AGENT_ID_ENV], AGENT_ID_ENV)
                if env.get(AGENT_ID_ENV)
                else None
            ),
            channel_agents=parse_channel_agents(env.get(CHANNEL_AGENTS_ENV)),
            tools_module=env.get(TOOLS_MODULE_ENV) or None,
            tool_state_machine_arn=env.get(TOOL_STATE_MACHINE_ENV) or None,
            tool_dispatch_mode=mode,  # type: ignore[arg-type]
            public_base_url=env.get(PUBLIC_BASE_URL_ENV) or None,
            callback_hosts=(
                tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else None
            ),
            secrets_path=env.get(SECRETS_PATH_ENV) or None,
            secrets_max_age_seconds=_seconds(
                env.get(SECRETS_MAX_AGE_ENV), SECRETS_MAX_AGE_ENV, DEFAULT_SECRETS_MAX_AGE_SECONDS
            ),
            reply_per_message=_flag(env.get(REPLY_PER_MESSAGE_ENV)),
            on_model_rate_limit=on_rate_limit,  # type: ignore[arg-type]
            one_moment_after_seconds=_seconds(
                env.get(ONE_MOMENT_AFTER_ENV),
                ONE_MOMENT_AFTER_ENV,
                DEFAULT_ONE_MOMENT_AFTER_SECONDS,
            ),
            support_relay=_support_relay(env),
        )


def _seconds(raw: str | None, setting: str, default: float) -> float:
    if raw is None or not raw.strip():
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise RuntimeConfigurationError(
            f"{setting} must be a number of seconds from 0 to 3600, got {raw.strip()[:20]!r}"
        )
    return seconds


def _support_relay(env: Mapping[str, str]) -> SupportRelay | None:
    try:
        return SupportRelay.from_env(env)
    except SupportRelayConfigError as exc:
        raise RuntimeConfigurationError(str(exc)) from None


# --------------------------------------------------------------------------------------------------
# Tool registry


def load_tool_registry(module_path: str) -> ToolRegistry:
    """The `ToolRegistry` of a module exposing `registry` or `TOOLS` (like the tool Lambda)."""
    from engine.toolkit import ToolRegistryNotConfigured, registry_from_module

    try:
        return registry_from_module(module_path, setting=TOOLS_MODULE_ENV)
    except ToolRegistryNotConfigured as exc:
        raise RuntimeConfigurationError(str(exc)) from exc
