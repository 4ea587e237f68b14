"""What the Bedrock chat and embedding adapters share: the `bedrock-runtime` client and the mapping
of its errors onto Waypoint's LLM error types.

The client authenticates like every boto3 client, through the function's IAM role on Lambda (no
API key), and is built with its own settings rather than the stores' (`infra.aws.clients`):
Bedrock's region may differ from the stack's (`WAYPOINT_BEDROCK_REGION`), the local stack's moto
endpoint does not serve it, and a model call needs a read timeout sized to a generation, not to a
DynamoDB write. botocore's own retries are off for chat (`max_attempts=1`): `engine.llm.TurnLLM`
retries throttling with backoff within the turn's retry budget, so a throttled call is never
retried by two layers at once.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from engine.errors import LLMError, LLMTransientError

REGION_ENV = "WAYPOINT_BEDROCK_REGION"
ENDPOINT_ENV = "WAYPOINT_BEDROCK_ENDPOINT_URL"

# Worth retrying: the service or the model is busy, starting or failed this once.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelErrorException",
    }
)


# A cross-region inference profile's id is its geography, then a model id: `us.anthropic.…`.
_PROFILE = re.compile(r"[a-z-]{2,7}\.[a-z0-9-]+\.[a-z0-9.:-]+")


def is_inference_profile(model_id: str) -> bool:
    """Whether `model_id` names a cross-region inference profile (`us.amazon.nova-micro-v1:0`)
    rather than a foundation model (`amazon.nova-micro-v1:0`): they are granted differently
    (template.yaml's `BedrockInferenceProfileIds` and `BedrockModelIds`)."""
    return bool(_PROFILE.fullmatch(model_id)) and model_id.count(".") >= 2


def template_parameters(model_ids: list[str]) -> dict[str, str]:
    """template.yaml's parameters that grant the functions exactly these Bedrock models."""
    profiles = [m for m in model_ids if is_inference_profile(m)]
    models = [m for m in model_ids if m not in profiles and not m.startswith("arn:")]
    return {
        "BedrockModelIds": ",".join(dict.fromkeys(models)),
        "BedrockInferenceProfileIds": ",".join(dict.fromkeys(profiles)),
    }


def bedrock_region(region: str | None = None) -> str:
    """`region`, else `WAYPOINT_BEDROCK_REGION`, else the function's own region."""
    from infra.aws.clients import aws_region

    return region or os.environ.get(REGION_ENV) or aws_region()


class BedrockConnection:
    """Settings for reaching `bedrock-runtime`, and the boto3 client built from them on first
    use (boto3 clients are thread-safe, so one serves every event loop and worker thread). An
    injected `client` (tests: a client with a Stubber or an event hook) is used as-is."""

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        max_attempts: int = 1,
        client: Any = None,
    ) -> None:
        self.region = bedrock_region(region) if client is None else client.meta.region_name
        self.endpoint_url = endpoint_url or os.environ.get(ENDPOINT_ENV) or None
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_attempts = max_attempts
        self._client = client
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The `bedrock-runtime` client (created on first use)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._new_client()
        return self._client

    def _new_client(self) -> Any:
        from infra.aws.clients import CallBudget, model_client

        budget = CallBudget(
            connect_timeout=self.connect_timeout,
            read_timeout=self.timeout,
            total_max_attempts=self.max_attempts,
        )
        return model_client(
            "bedrock-runtime", region=self.region, endpoint_url=self.endpoint_url, budget=budget
        )


def map_bedrock_error(exc: Exception, *, model: str, region: str) -> LLMError:
    """Translate a botocore exception from a Bedrock call into the error type `TurnLLM`'s policy
    acts on: throttling, unavailability and timeouts are transient (retried with backoff); a
    request Bedrock refuses is final, with a message naming the model and what to fix."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    where = f"Bedrock ({region})"
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError):
        return LLMTransientError(f"request to {where} timed out (model {model!r})")
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError):
        return LLMTransientError(f"could not connect to {where} (model {model!r}): {exc}")
    if isinstance(exc, NoCredentialsError):
        return LLMError(
            f"no AWS credentials to call {where} for model {model!r}. On Lambda the function's "
            "role provides them; elsewhere configure a profile or AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY."
        )
    if not isinstance(exc, ClientError):
        return LLMError(f"unexpected error calling {where} for model {model!r}: {exc!r}")
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", "")) or str(exc)
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code == "ThrottlingException":
        # Too many requests, whatever HTTP status carried it: status 429 is what marks a
        # rate-limited model to the turn (`engine.errors.is_rate_limit`: deferred, not answered).
        status = 429
    if code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500):
        return LLMTransientError(
            f"{where} answered {code or status} for model {model!r}: {message}", status=status
        )
    return LLMError(
        f"{where} refused model {model!r} ({code or status}): {message}. {_hint(code, model, region)}"
    )


def _hint(code: str, model: str, region: str) -> str:
    if code == "AccessDeniedException":
        return (
            f"Grant the function's role bedrock:InvokeModel on {model!r} (template.yaml's "
            f"BedrockModelIds parameter lists the models it may call) and enable access to the "
            f"model in the Bedrock console of {region}."
        )
    if code == "ResourceNotFoundException":
        return (
            f"Check the model id {model!r} (AgentConfig.models / default_model) and that the "
            f"model is offered in {region} (WAYPOINT_BEDROCK_REGION)."
        )
    if code == "ServiceQuotaExceededException":
        return (
            f"Ask for a higher Bedrock quota for {model!r} in {region}, or route to another model."
        )
    return (
        f"Check the model id {model!r} (a Bedrock model id such as "
        "anthropic.claude-3-5-haiku-20241022-v1:0, or an inference profile such as "
        "us.anthropic.claude-3-5-haiku-20241022-v1:0 for models offered only through one), and "
        "that the model supports tool use in the Converse API."
    )
