"""Everything a Lambda (or the local stack) needs, built from the environment on first use.

One `Runtime` per warm container: stores, LLM, embedder, vector indexes, tool dispatcher, the
`TurnEngine`, the chat channels, the SQS turn queue and one event loop. Each part is built the
first time it is used and then kept, so a webhook that never runs a turn never imports the engine
(numpy), and nothing imports `openai` unless the OpenAI provider is chosen.

    runtime = current_runtime()                 # the container's runtime, built lazily
    output = runtime.run(runtime.engine.handle(session_id, messages))

A Lambda worker builds them all at once in its init phase instead (`prepare_for_turns`, called by
`functions.worker_init`), before a customer waits. Tests build their own
(`install_runtime(Runtime(llm=..., channels=..., http=...))`) and drop it with `reset_runtime()`.

Configuration (all optional unless the part is used):

| variable                           | meaning                                                      |
|------------------------------------|--------------------------------------------------------------|
| `WAYPOINT_TABLE` / `_BUCKET` / `_QUEUE_URL` | the template's resources (see `infra.aws.clients`)  |
| `WAYPOINT_AGENT_ID`                | agent answering channel messages                             |
| `WAYPOINT_CHANNEL_AGENTS`          | per-channel agents: `telegram=bank,slack=helpdesk`           |
| `WAYPOINT_TOOL_STATE_MACHINE_ARN`  | run tools through Step Functions (else in process)           |
| `WAYPOINT_TOOL_DISPATCH_MODE`      | `sync` (AWS, default) or `poll` (moto)                       |
| `WAYPOINT_TOOLS_MODULE`            | module with `registry` / `TOOLS`, for in-process tools       |
| `WAYPOINT_TOOL_FUNCTION`          | the tool function, asked for its tools at publish            |
| `WAYPOINT_PUBLIC_BASE_URL`         | scheme + host the platforms call (Twilio signs the URL)      |
| `WAYPOINT_CALLBACK_HOSTS`          | comma-separated hosts generic-channel callbacks may target   |
| `WAYPOINT_SECRETS_PATH`            | SSM path of the secrets; each part reads only its own names  |
| `WAYPOINT_SECRETS_MAX_AGE_SECONDS` | read the secrets path again after this long (default 60)     |
| `WAYPOINT_SECRET_DIGEST_KEY`       | secret (SSM): key of the digests sessions keep of secrets    |
| `WAYPOINT_REPLY_PER_MESSAGE`       | `1`: one turn per message instead of one per burst           |
| `WAYPOINT_ON_MODEL_RATE_LIMIT`     | `defer` (default): a rate-limited turn is answered later; `fallback` |
| `WAYPOINT_ONE_MOMENT_AFTER_SECONDS` | a deferred message's wait before the "one moment" line (8) |
| `WAYPOINT_SUPPORT_SLACK_CHANNEL`   | the Slack support channel of handoffs (`infra.handoff_slack`) |
| `WAYPOINT_SUPPORT_SLACK_TEAMS`     | required with it: team ids whose members may write to customers |
| `WAYPOINT_SUPPORT_SLACK_USERS`     | optional: only these Slack users may (`infra.channels.support_channel`) |

The settings are read by `infra.runtime_settings.RuntimeSettings`; the turn queue's message is
`infra.turn_queue.QueuedMessage`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from infra.runtime_settings import (
    AGENT_ID_ENV,
    CHANNEL_AGENTS_ENV,
    ENGINE_SECRET_NAMES,
    LLM_SECRET_NAMES,
    MANAGEMENT_API_KEY_ENV,
    MANAGEMENT_SECRET_NAMES,
    MIN_SECRET_DIGEST_KEY_CHARS,
    SECRET_DIGEST_KEY_ENV,
    SECRETS_PATH_ENV,
    RuntimeConfigurationError,
    RuntimeSettings,
    load_tool_registry,
)

if TYPE_CHECKING:  # the real imports happen where each part is built
    import httpx

    from engine.model import AgentSnapshot
    from engine.ports import Clock, Embedder, SchematicLLM, ToolDispatcher, VectorIndex
    from engine.turn import TurnEngine
    from infra.aws.dynamo_agents import DynamoAgentStore
    from infra.aws.dynamo_inbox import DynamoInboxStore
    from infra.aws.dynamo_sessions import DynamoSessionStore
    from infra.aws.dynamo_variables import DynamoVariableStore
    from infra.channels.base import Channel
    from infra.outbox import DynamoOutbox
    from infra.rotating_secrets import RotatingSecret
    from infra.turn_queue import QueuedMessage

log = logging.getLogger(__name__)
T = TypeVar("T")

_SSM_MAX_NAMES = 10  # GetParameters takes at most 10 names per call


def _get_parameters(path: str, names: list[str], *, decrypt: bool) -> dict[str, dict[str, Any]]:
    """The parameters `path/NAME` of `names` that exist, by name, 10 per `GetParameters` call."""
    from infra.aws.clients import client

    ssm = client("ssm")
    prefix = path.rstrip("/")
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), _SSM_MAX_NAMES):
        batch = [f"{prefix}/{name}" for name in names[start : start + _SSM_MAX_NAMES]]
        page = ssm.get_parameters(Names=batch, WithDecryption=decrypt)
        for parameter in page.get("Parameters", []):
            found[parameter["Name"].rsplit("/", 1)[-1]] = parameter
    return found


def _monotonic() -> float:
    """Seconds on a clock that never goes back: how old the secrets read are (tests move it)."""
    return time.monotonic()


# --------------------------------------------------------------------------------------------------
# The runtime


@dataclass(frozen=True)
class PublishedAgent:
    agent_id: str
    version: str
    embedded: dict[str, int]  # namespace → number of vectors written to S3


class Runtime:
    """The parts of a warm container, each built on first use (see the module docstring).

    Keyword arguments replace parts before they are built (tests, the local stack): `llm`,
    `embedder`, `tools`, `channels`, `http`, `clock`, `outbox`."""

    _OVERRIDABLE = frozenset({"llm", "embedder", "tools", "channels", "http", "clock", "outbox"})

    def __init__(self, settings: RuntimeSettings | None = None, **parts: Any) -> None:
        unknown = set(parts) - self._OVERRIDABLE
        if unknown:
            raise TypeError(f"Runtime() got unknown parts {sorted(unknown)}")
        self.settings = settings or RuntimeSettings.from_env()
        self._given_channels: dict[str, Channel] | None = None
        self._built_channels: dict[str, Channel] | None = None
        self._channels_revision = -1
        for name, value in parts.items():
            if value is not None:
                setattr(self, name, value)  # what cached_property would have stored
        # When each secret was last read from the secrets path (monotonic), the values this
        # runtime exported (so a later read may replace or remove them, never a variable set
        # by hand), and a revision that changes whenever one of them did.
        self._secrets_read_at: dict[str, float] = {}
        self._secrets_exported: dict[str, str] = {}
        self._secret_versions: dict[str, int] = {}  # each parameter's version as last read
        self.secrets_revision = 0
        self._missing_indexes: set[tuple[str, str]] = set()
        self.known_sessions: set[str] = set()  # created or seen by this container
        self._lock = threading.Lock()

    # ---- secrets

    def load_secrets(self, names: Iterable[str]) -> None:
        """Export the named parameters under `WAYPOINT_SECRETS_PATH` (SSM, decrypted) as
        environment variables. Variables set otherwise win: a local `.env` overrides the path.
        Each part asks only for the names it uses (`ChannelSecrets.env_names()`,
        `LLM_SECRET_NAMES`, `MANAGEMENT_SECRET_NAMES`), so a function's IAM policy can grant
        exactly those parameters: the webhook can never read the OpenAI key.

        A name is read again once `secrets_max_age_seconds` have passed since it was read, so a
        changed or removed parameter (a step of a key rotation, `infra.rotating_secrets`) reaches
        a warm container within that time; `secrets_revision` then changes (the channels are
        rebuilt on it). If reading again fails, the values already read are kept (logged) and
        read again after another max age; only a first read that fails raises."""
        with self._lock:
            now = _monotonic()
            max_age = self.settings.secrets_max_age_seconds
            wanted = [
                name
                for name in dict.fromkeys(names)
                if name not in self._secrets_read_at or now - self._secrets_read_at[name] >= max_age
            ]
            if not wanted:
                return
            if self.settings.secrets_path:
                try:
                    values = self._changed_parameters(self.settings.secrets_path, wanted)
                except Exception:
                    if not all(name in self._secrets_read_at for name in wanted):
                        raise
                    log.warning(
                        "reading the secrets under %s again failed; keeping the values read "
                        "before (%s)",
                        SECRETS_PATH_ENV,
                        ", ".join(wanted),
                        exc_info=True,
                    )
                    values = None
                for name, value in (values or {}).items():
                    self._export_secret(name, value)
            for name in wanted:
                self._secrets_read_at[name] = now

    def _export_secret(self, name: str, value: str | None) -> None:
        """Set (or, when the parameter is gone, unset) the variable `name` — unless it was set
        by something other than this runtime, which wins."""
        current = os.environ.get(name)
        ours = self._secrets_exported.get(name)
        if current is not None and current != ours:
            return  # set by hand, a local `.env`, or another runtime of this process
        if value is None:
            if current is not None:
                del os.environ[name]
                del self._secrets_exported[name]
                self.secrets_revision += 1
            return
        if current != value:
            os.environ[name] = value
            self._secrets_exported[name] = value
            self.secrets_revision += 1

    def _changed_parameters(self, path: str, names: list[str]) -> dict[str, str | None]:
        """The value of each of `names` read for the first time, or whose parameter changed
        since it was read (None: it no longer exists). A name read before is checked by its
        parameter's version, without decryption: KMS decrypts only what changed (each decryption
        of a SecureString is a billed KMS request; the check every max age is not)."""
        known = [name for name in names if name in self._secret_versions]
        stale = [name for name in names if name not in self._secret_versions]
        if known:
            versions = self._parameter_versions(path, known)
            stale += [n for n in known if versions.get(n, 0) != self._secret_versions[n]]
        if not stale:
            return {}
        read = self._read_parameters(path, stale)
        changed: dict[str, str | None] = {}
        for name in stale:
            value, version = read.get(name, (None, 0))
            self._secret_versions[name] = version  # 0: no such parameter
            changed[name] = value
        return changed

    @staticmethod
    def _read_parameters(path: str, names: list[str]) -> dict[str, tuple[str, int]]:
        """Each parameter's decrypted value and version, by `GetParameters` by exact name (never
        by path: IAM could not tell the parameters of a path apart). Parameters that do not
        exist are simply absent."""
        return {
            name: (str(parameter["Value"]), int(parameter.get("Version", 0)))
            for name, parameter in _get_parameters(path, names, decrypt=True).items()
        }

    @staticmethod
    def _parameter_versions(path: str, names: list[str]) -> dict[str, int]:
        """Each existing parameter's version, read without decrypting it (no KMS request)."""
        return {
            name: int(parameter.get("Version", 0))
            for name, parameter in _get_parameters(path, names, decrypt=False).items()
        }

    def management_api_key(self) -> RotatingSecret | None:
        """The management API key (`WAYPOINT_MANAGEMENT_API_KEY`, or from the secrets path):
        one value, or two — the new and the old, space-separated — while it is rotated
        (`infra.rotating_secrets`). None when it is not set; more than two values raise
        `RuntimeConfigurationError`."""
        from infra.rotating_secrets import RotatingSecret

        self.load_secrets(MANAGEMENT_SECRET_NAMES)
        raw = os.environ.get(MANAGEMENT_API_KEY_ENV) or ""
        if not raw.strip():
            return None
        key = RotatingSecret(raw)
        if len(key.values) > 2:
            raise RuntimeConfigurationError(
                f"{MANAGEMENT_API_KEY_ENV} holds {len(key.values)} space-separated values; "
                "during a rotation it holds two, the new key and the old one (docs/deploy.md)"
            )
        return key

    def secret_digest_key(self) -> bytes | None:
        """The deployment's key of the digests sessions keep of their secrets, so that a model
        echoing one in a later turn is masked (`engine.privacy.digests`):
        `WAYPOINT_SECRET_DIGEST_KEY`, or from the secrets path. Without it, None — sessions keep
        no digest (never one under a key anyone could know) and the reason is logged; a key
        shorter than 32 characters is refused."""
        self.load_secrets(ENGINE_SECRET_NAMES)
        value = os.environ.get(SECRET_DIGEST_KEY_ENV) or ""
        if not value:
            where = (
                f"the SecureString parameter {self.settings.secrets_path}/{SECRET_DIGEST_KEY_ENV}"
                if self.settings.secrets_path
                else f"the environment variable {SECRET_DIGEST_KEY_ENV}"
            )
            log.log(
                logging.ERROR if self.settings.secrets_path else logging.WARNING,
                "%s is not configured: sessions keep no digest of their secrets, so a secret a "
                "model echoes in a later turn than it was typed in is not masked. Set %s "
                "(docs/deploy.md)",
                SECRET_DIGEST_KEY_ENV,
                where,
            )
            return None
        if len(value) < MIN_SECRET_DIGEST_KEY_CHARS:
            raise RuntimeConfigurationError(
                f"{SECRET_DIGEST_KEY_ENV} is {len(value)} characters long; use at least "
                f"{MIN_SECRET_DIGEST_KEY_CHARS} random ones (openssl rand -hex 32)"
            )
        return value.encode()

    # ---- stores

    @cached_property
    def clock(self) -> Clock:
        from engine.clock import SystemClock

        return SystemClock()

    @cached_property
    def agents(self) -> DynamoAgentStore:
        from infra.aws.dynamo_agents import DynamoAgentStore

        return DynamoAgentStore(clock=self.clock)

    @cached_property
    def sessions(self) -> DynamoSessionStore:
        from infra.aws.dynamo_sessions import DynamoSessionStore

        return DynamoSessionStore(clock=self.clock)

    @cached_property
    def inbox(self) -> DynamoInboxStore:
        from infra.aws.dynamo_inbox import DynamoInboxStore

        return DynamoInboxStore(clock=self.clock)

    @cached_property
    def variables(self) -> DynamoVariableStore:
        from infra.aws.dynamo_variables import DynamoVariableStore

        return DynamoVariableStore()

    @cached_property
    def outbox(self) -> DynamoOutbox:
        from infra.outbox import DynamoOutbox

        return DynamoOutbox(clock=self.clock)

    # ---- models and tools

    @cached_property
    def llm(self) -> SchematicLLM:
        from infra.llm.factory import build_routed_llm

        self.load_secrets(LLM_SECRET_NAMES)  # OPENAI_API_KEY may live in the secrets path
        return build_routed_llm()  # each call to its model's provider (`infra.llm.routing`)

    @cached_property
    def embedder(self) -> Embedder:
        from infra.llm.factory import build_embedder

        self.load_secrets(LLM_SECRET_NAMES)
        return build_embedder()

    @cached_property
    def tools(self) -> ToolDispatcher | None:
        """Step Functions when a state machine is configured, else the registry in process,
        else None (an agent without tools)."""
        if self.settings.tool_state_machine_arn:
            from infra.aws.sfn_dispatcher import StepFunctionsDispatcher

            return StepFunctionsDispatcher(
                self.settings.tool_state_machine_arn, mode=self.settings.tool_dispatch_mode
            )
        if self.settings.tools_module:
            from engine.toolkit import InProcessDispatcher

            return InProcessDispatcher(load_tool_registry(self.settings.tools_module))
        return None

    async def index_for(self, agent: AgentSnapshot) -> VectorIndex | None:
        """The S3 vector index of an agent version, or None when it has no journeys to recall or
        was published without embeddings (recall then uses active journeys only)."""
        from infra.aws.s3_vectors import EmbeddingsNotPublished, S3VectorIndex

        key = (agent.id, agent.version)
        if not agent.journeys or key in self._missing_indexes:
            return None
        index = S3VectorIndex(agent.id, agent.version)
        try:
            await index.load()  # cached per container after the first turn
        except EmbeddingsNotPublished:
            log.warning(
                "agent %s version %s has no embeddings in S3; publish it again with "
                "`waypoint publish` (journey recall by similarity is off meanwhile)",
                agent.id,
                agent.version,
            )
            self._missing_indexes.add(key)
            return None
        return index

    @cached_property
    def engine(self) -> TurnEngine:
        from engine.turn import EngineDeps, TurnEngine
        from infra.llm.factory import OfflinePredictor

        deps = EngineDeps(
            llm=self.llm,
            embedder=self.embedder,
            tools=self.tools,
            clock=self.clock,
            secret_key=self.secret_digest_key(),
            predictor=OfflinePredictor(),
        )
        return TurnEngine(
            self.agents,
            self.sessions,
            deps,
            index_for=self.index_for,
            variables=self.variables,
            defer_rate_limited=self.settings.on_model_rate_limit == "defer",
        )

    def prepare_for_turns(self) -> None:
        """Build now what the first turn would build on first use: the secrets read, the stores
        and their boto3 clients (DynamoDB; S3 for the vectors), the LLM and embedder with their
        HTTP clients on this runtime's loop (`openai` imported), the tools, the engine, and — only
        when an enabled channel or the support relay sends replies — the outbound HTTP client; the
        modules and the language model a turn loads on first use; and the snapshot and vectors of
        the agents it answers (`read_agents_ahead`).
        A Lambda container calls it in its init phase (`functions.worker_init`), before a
        customer waits; anything that fails raises, and is built again on first use."""
        import infra.aws.s3_vectors
        import infra.channels.typing
        import infra.handoff_slack  # noqa: F401
        from engine.language.detection import detect
        from infra.aws.clients import client
        from infra.channels.registry import enabled_channels

        self.engine  # noqa: B018  (builds the stores, LLM, embedder, tools; reads the secrets)
        self.outbox  # noqa: B018
        client("s3")  # the vectors' first download
        for part in (self.llm, self.embedder):
            connect = getattr(part, "connect", None)  # the OpenAI adapters' clients
            if connect is not None:
                self.run(connect())
        if enabled_channels(self.channels) or self.settings.support_relay is not None:
            self.http  # noqa: B018
        detect("hello there")  # the language model (fastText, ~30 ms to read)
        self.run(self.read_agents_ahead())

    async def read_agents_ahead(self) -> list[str]:
        """Read the snapshot and the vectors of each agent this runtime answers
        (`WAYPOINT_AGENT_ID`, `WAYPOINT_CHANNEL_AGENTS`) into the container's warm caches, so the
        first turn finds them there. One that cannot be read (not published yet) is logged and
        left to its first turn. Returns the agents read."""
        wanted = [self.settings.agent_id, *self.settings.channel_agents.values()]
        read = []
        for agent_id in dict.fromkeys(a for a in wanted if a):
            try:
                await self.index_for(await self.agents.get(agent_id))
            except Exception:
                log.warning(
                    "agent %s could not be read ahead of its first turn; that turn reads it",
                    agent_id,
                    exc_info=True,
                )
                continue
            read.append(agent_id)
        return read

    async def publish_agent(self, snapshot: AgentSnapshot) -> PublishedAgent:
        """Publish an agent version: embeddings to S3 FIRST, then the store's atomic pointer
        flip, so a turn never sees a version whose vectors are missing."""
        from engine.agent_id import check_agent_id
        from engine.memory.stores import versioned
        from infra.aws.clients import BUCKET_ENV, client, required_env
        from infra.aws.s3_vectors import publish_embeddings

        check_agent_id(snapshot.id)  # before the first S3 write (`bank#x` wrote a manifest)
        snapshot = versioned(snapshot)
        bucket = required_env(BUCKET_ENV, "the S3 embeddings bucket")
        manifest = await publish_embeddings(client("s3"), bucket, snapshot, self.embedder)
        version = await self.agents.publish(snapshot)
        return PublishedAgent(snapshot.id, version, dict(manifest.namespaces))

    # ---- channels and delivery

    @property
    def channels(self) -> dict[str, Channel]:
        """The chat channels, built from the channel secrets; built again when one of them
        changed in the secrets path (a rotation step, `load_secrets`). Channels given to the
        runtime (tests, the local stack) are used as they are."""
        if self._given_channels is not None:
            return self._given_channels
        from infra.channels.registry import ChannelSecrets, build_channels

        self.load_secrets(ChannelSecrets.env_names())
        if self._built_channels is None or self._channels_revision != self.secrets_revision:
            self._built_channels = build_channels(
                ChannelSecrets.from_env(),
                self.clock,
                public_base_url=self.settings.public_base_url,
                callback_hosts=self.settings.callback_hosts,
            )
            self._channels_revision = self.secrets_revision
        return self._built_channels

    @channels.setter
    def channels(self, given: dict[str, Channel]) -> None:
        self._given_channels = given

    @cached_property
    def http(self) -> httpx.AsyncClient:
        """One small client for every outbound send of this container (connection reuse), with
        the process's TLS context (`infra.tls`: the LLM clients' too, loaded once)."""
        import httpx

        from infra.tls import default_tls_context

        return httpx.AsyncClient(
            verify=default_tls_context(),
            timeout=httpx.Timeout(10.0, connect=3.0),
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=5),
        )

    def agent_for(self, channel: str) -> str:
        """The agent answering `channel`: its `WAYPOINT_CHANNEL_AGENTS` entry, else
        `WAYPOINT_AGENT_ID`."""
        agent_id = self.settings.channel_agents.get(channel) or self.settings.agent_id
        if not agent_id:
            raise RuntimeConfigurationError(
                f"no agent answers the {channel} channel: set {AGENT_ID_ENV} (or "
                f"{CHANNEL_AGENTS_ENV}={channel}=<agent id>)"
            )
        return agent_id

    # ---- the turn queue

    @cached_property
    def sqs(self) -> Any:
        from infra.aws.clients import client

        return client("sqs")

    @cached_property
    def queue_url(self) -> str:
        from infra.aws.clients import QUEUE_URL_ENV, required_env

        return required_env(QUEUE_URL_ENV, "the SQS FIFO turn queue's URL")

    def enqueue(self, queued: QueuedMessage) -> str:
        """Send one message to the turn queue; returns its SQS message id."""
        response = self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=queued.model_dump_json(),
            MessageGroupId=queued.session_id,
            MessageDeduplicationId=queued.dedup_id,
        )
        return str(response["MessageId"])

    # ---- the event loop

    @cached_property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The container's event loop: the http client and LLM clients stay bound to one loop
        across invocations."""
        return asyncio.new_event_loop()

    def bind_event_loop(self) -> None:
        """Make `loop` the thread's current loop (Mangum runs the ASGI app on that one)."""
        asyncio.set_event_loop(self.loop)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine to completion on the container's loop (from sync handler code)."""
        return self.loop.run_until_complete(work)

    def close(self) -> None:
        """Release the http client and the loop (tests; a container simply ends)."""
        loop = self.__dict__.get("loop")
        http = self.__dict__.pop("http", None)
        if loop is not None and not loop.is_closed():
            if http is not None:
                loop.run_until_complete(http.aclose())
            loop.close()


# --------------------------------------------------------------------------------------------------
# The container's runtime

_current: Runtime | None = None
_current_lock = threading.Lock()


def current_runtime() -> Runtime:
    """This container's runtime, built from the environment on first call."""
    global _current
    if _current is None:
        with _current_lock:
            if _current is None:
                _current = Runtime()
    return _current


def install_runtime(runtime: Runtime) -> Runtime:
    """Use `runtime` from now on (tests, the local stack); the previous one is closed."""
    global _current
    with _current_lock:
        previous, _current = _current, runtime
    if previous is not None and previous is not runtime:
        previous.close()
    return runtime


def reset_runtime() -> None:
    """Forget the runtime; the next `current_runtime()` rebuilds it from the environment."""
    global _current
    with _current_lock:
        previous, _current = _current, None
    if previous is not None:
        previous.close()
