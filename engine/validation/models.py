"""Load-time checks of the agent's model routing (`AgentConfig.models`, `default_model`): each
problem names the setting to fix. A purpose that does not exist is refused earlier, where the
config is read (`LLMPurpose`); here, the ids themselves: an unknown provider prefix, an empty or
spaced id, a Bedrock id that Bedrock could not accept.

Which providers a deployment reaches is not known here (it is a deployment setting), so an id
without a prefix is checked only for its shape; a prefix that is not a provider Waypoint has is
an error only when it reads as one — a misspelt provider (`bedrok:`), or another vendor's name
(`anthropic:`) — so that a local server's `mistral:7b` stays a model id.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

from engine.agent_config import MODEL_PROVIDERS, AgentConfig, ModelRef
from engine.model import AgentSnapshot

# Vendors people write as a prefix, which Waypoint reaches through a provider it has.
_OTHER_VENDORS = {
    "anthropic": "Claude runs on Bedrock: bedrock:anthropic.claude-…",
    "aws": "use bedrock:<model id>",
    "amazon": "use bedrock:<model id>",
    "azure": "Azure OpenAI is OpenAI-compatible: openai:<deployment> with OPENAI_BASE_URL",
    "ollama": "Ollama is OpenAI-compatible: openai:<model> with OPENAI_BASE_URL",
    "vllm": "vLLM is OpenAI-compatible: openai:<model> with OPENAI_BASE_URL",
    "google": "use an OpenAI-compatible endpoint: openai:<model> with OPENAI_BASE_URL",
    "gemini": "use an OpenAI-compatible endpoint: openai:<model> with OPENAI_BASE_URL",
    "vertex": "use an OpenAI-compatible endpoint: openai:<model> with OPENAI_BASE_URL",
}
# Bedrock's model ids (`vendor.model-v1:0`, a profile's `us.vendor.model-v1:0`) and ARNs.
_BEDROCK_ID = re.compile(r"[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63})+([.:][a-z0-9-]{1,63})*")
_BEDROCK_ARN = re.compile(r"arn:aws(-[a-z-]+)?:bedrock:[a-z0-9-]{1,20}:\d{0,12}:[a-z-]+/\S+")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z_-]*")


def model_routing_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """What is wrong with the model ids `snapshot` routes its calls to."""
    yield from _model_id_problems("agent.config.default_model", snapshot.config.default_model)
    for purpose, model_id in snapshot.config.models.items():
        yield from _model_id_problems(f"agent.config.models.{purpose.value}", model_id)


def model_id_problem(model_id: str) -> str | None:
    """What is wrong with one `[provider:]model` id, or None."""
    if not model_id.strip():
        return "is empty; give a model id, e.g. gpt-4o-mini or bedrock:anthropic.claude-…"
    if any(c.isspace() for c in model_id):
        return f"{model_id!r} contains spaces; a model id has none"
    ref = ModelRef.parse(model_id)
    if ref.provider is None:
        return _unknown_provider(model_id)
    if not ref.model:
        return f"{model_id!r} names no model after '{ref.provider}:'"
    if ref.provider == "bedrock" and not (
        _BEDROCK_ID.fullmatch(ref.model) or _BEDROCK_ARN.fullmatch(ref.model)
    ):
        return (
            f"{model_id!r} is not a Bedrock model id: use one like "
            "anthropic.claude-3-5-haiku-20241022-v1:0, an inference profile like "
            "us.anthropic.claude-3-5-haiku-20241022-v1:0, or an ARN"
        )
    return None


def _model_id_problems(where: str, model_id: str) -> Iterator[str]:
    problem = model_id_problem(model_id)
    if problem is not None:
        yield f"{where}: {problem}"


def _unknown_provider(model_id: str) -> str | None:
    head, colon, _ = model_id.partition(":")
    if not colon or not _PREFIX.fullmatch(head):
        return None
    known = ", ".join(MODEL_PROVIDERS)
    if head.lower() in _OTHER_VENDORS:
        return (
            f"unknown provider {head!r} in {model_id!r} (providers: {known}); "
            f"{_OTHER_VENDORS[head.lower()]}"
        )
    close = difflib.get_close_matches(head.lower(), MODEL_PROVIDERS, n=1, cutoff=0.7)
    if close:
        return (
            f"unknown provider {head!r} in {model_id!r} (providers: {known}); "
            f"did you mean '{close[0]}:'?"
        )
    return None


def routed_models(config: AgentConfig) -> list[str]:
    """Every model id `config` may call, default first, each once."""
    ids = [config.default_model, *config.models.values()]
    return list(dict.fromkeys(ids))
