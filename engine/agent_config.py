"""How the engine runs an agent, as opposed to what the agent says and does (`engine.model`).

`AgentConfig` holds the run-time settings of one agent: its default `CompositionMode` (guidelines
and journeys may override it), recall thresholds on large agents, the `TurnBudget`, per-purpose
model routing (`LLMPurpose`), the replies it falls back on (no template fits, unreadable files),
and how a conversation is handed to a person (`HandoffConfig`, `BusinessHours`, the built-in
handoff tool and its template tags). One `AgentConfig` travels in each `AgentSnapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.language.lines import Lines
from engine.language.tags import normalize_tag
from engine.pricing import ModelPrice

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CompositionMode(StrEnum):
    """How the reply is written: freely, preferring approved templates, or only from templates."""

    FLUID = "fluid"
    CANNED_FLUID = "canned_fluid"
    CANNED_STRICT = "canned_strict"


class LLMPurpose(StrEnum):
    """What an LLM call is for; the unit of model routing and of trace accounting."""

    MATCH_GUIDELINES = "match_guidelines"
    DISAMBIGUATE = "disambiguate"
    SELECT_JOURNEY_NODE = "select_journey_node"
    CALL_TOOLS = "call_tools"
    COMPOSE = "compose"
    # A secret typed ahead of the step that asks for it (`engine.matching.secret_reading`)
    READ_SECRETS = "read_secrets"


# The providers a model id may name (`provider:model`); which ones a deployment can reach, and its
# default for ids without a prefix, are deployment settings (`infra.llm.factory`).
MODEL_PROVIDERS = ("openai", "bedrock", "offline")


@dataclass(frozen=True)
class ModelRef:
    """A model id read as `[provider:]model`: `bedrock:anthropic.claude-3-5-haiku-20241022-v1:0`,
    `openai:gpt-4o-mini`, or `gpt-4o-mini` (provider None: the deployment's default). Only a known
    provider's name counts as a prefix, so ids with colons of their own (Bedrock's `…-v1:0`, a
    local server's `llama3.1:8b`) read as they are."""

    provider: str | None
    model: str

    @classmethod
    def parse(cls, model_id: str) -> ModelRef:
        head, colon, rest = model_id.partition(":")
        if colon and head.strip().lower() in MODEL_PROVIDERS:
            return cls(head.strip().lower(), rest)
        return cls(None, model_id)


class TurnBudget(BaseModel):
    """Upper bounds on one turn's cost. When a stage would exceed them, the turn composes with what
    it has and the trace says so. One call is always reserved for composing the reply."""

    model_config = _FROZEN
    max_llm_calls: int = 12
    max_prompt_tokens: int = 60_000


class Speculation(BaseModel):
    """Drafting the reply in the same round as matching (`engine.stages.speculation`): the
    turn's decisions are predicted (by the deployment's fast predictor, the offline model), the
    reply those decisions would get is asked for at once, and it is sent only when the verified
    decisions give the very same reply prompt — one LLM round instead of two. A wrong prediction
    costs the draft's tokens, never a different decision or reply. A predicted call of a tool
    declared `speculative` (it only reads) runs ahead, so a turn that looks something up can
    reply in one round too (`engine.stages.tools_ahead`); no other tool runs on a prediction.

    `speculation: on` (or `off`, the default), or `{mode: on, max_prompt_tokens: N}`: draft only
    replies whose prompt is at most about N tokens."""

    model_config = _FROZEN
    mode: Literal["off", "on"] = "off"
    max_prompt_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        # `speculation: on` — YAML 1.1 (PyYAML) reads a bare on/off as a boolean
        if isinstance(value, bool):
            return {"mode": "on" if value else "off"}
        if isinstance(value, str):
            return {"mode": value}
        return value

    @property
    def enabled(self) -> bool:
        return self.mode == "on"


# The built-in handoff action: named in a guideline's `tools` or as a journey tool step, it hands
# the conversation to a person (`engine.handoff`) instead of calling anything.
HANDOFF_TOOL = "hand_off_to_person"
HANDOFF_TEMPLATE_TAG = "handoff"  # canned modes: the approved template that announces a handoff
HANDOFF_UNAVAILABLE_TAG = "handoff_unavailable"  # … and the one for "no one is available"


class BusinessHours(BaseModel):
    """When people are there to take a handed-off conversation (local time of `timezone`)."""

    model_config = _FROZEN
    timezone: str = "UTC"
    days: tuple[int, ...] = (0, 1, 2, 3, 4)  # 0 = Monday … 6 = Sunday
    opens: str = Field(default="09:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    closes: str = Field(default="17:00", pattern=r"^([01][0-9]|2[0-4]):[0-5][0-9]$")


class HandoffConfig(BaseModel):
    """How the agent steps aside for a person (`engine.handoff`)."""

    model_config = _FROZEN
    # The customer asking for a person ("can I talk to a human?") hands off, without a rule.
    customer_request: bool = True
    # Extra wordings that count as asking for a person (case-insensitive phrases).
    request_phrases: tuple[str, ...] = ()
    # What the customer is told when handed off (canned modes: a template tagged `handoff`).
    message: str = "I'm passing you to a person from our team. They'll reply right here."
    # … when no one is there (out of hours, or no one picked it up in time); a ticket is recorded.
    unavailable_message: str = (
        "No one from our team is available right now. We've recorded your request and a person "
        "will get back to you here as soon as possible."
    )
    business_hours: BusinessHours | None = None  # None: someone is always there
    # No person took it within this many seconds: a ticket is recorded and the customer told.
    pickup_timeout_seconds: int = Field(default=900, ge=60)


class AgentConfig(BaseModel):
    model_config = _FROZEN
    composition_mode: CompositionMode = CompositionMode.FLUID
    journey_top_k: int = 1
    # A journey is predicted by vector recall (its node selection run speculatively in round 1)
    # only when what the customer said this turn is at least this similar to it (cosine). Below
    # it the prediction is hopeless ("thanks", "hello") and the call would be discarded; a journey
    # the turn enters anyway is matched in a supplemental round. Default from the offline
    # embedder on the banking and synthetic runs (docs/BENCHMARKS.md): closings and greetings
    # score ≤ 0.16 against every journey, requests that enter one ≥ 0.21.
    # -1 = always predict the top journeys (the behaviour before the threshold).
    journey_min_similarity: float = Field(default=0.18, ge=-1.0, le=1.0)
    # Recall on large agents: when more agent-wide guidelines (or more journeys' activation
    # conditions) than this reach a turn, only the most similar to the conversation are matched
    # (vector top-k; pending, continuous-applied and high-criticality guidelines always are).
    # 0 = match them all, every turn.
    guideline_top_k: int = Field(default=30, ge=0)
    condition_top_k: int = Field(default=20, ge=0)
    max_tool_iterations: int = 3
    max_journey_depth: int = 5  # BFS depth of the node map shown to the LLM
    batch_prompt_budget_chars: int = 12_000  # size of one matching batch's guideline section
    budget: TurnBudget = Field(default_factory=TurnBudget)
    speculation: Speculation = Field(default_factory=Speculation)
    # Per-purpose routing: purpose → `[provider:]model` (`ModelRef`), e.g. a small fast model for
    # matching and a larger one for composing; purposes not listed use `default_model`.
    models: dict[LLMPurpose, str] = Field(default_factory=dict)
    default_model: str = "gpt-4o-mini"
    # Dollars per 1M tokens by model id, over the example prices of `engine.pricing` (model by
    # model): what the trace's cost of a turn is computed with.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    explain: bool = False  # verbose rationales in LLM outputs, for debugging only
    # what canned_strict sends when no approved template fits (it never sends free text)
    no_match_response: str = "Sorry, I can't help with that here. Could you rephrase?"
    # what a message of only files the agent cannot read (a voice note, a photo without a
    # caption, a document) is answered with, instead of silence
    unsupported_media_response: str = (
        "Sorry, I can't open attachments like that here. Could you type what you need?"
    )
    max_canned_candidates: int = 30
    max_concurrent_llm_calls: int = 8
    llm_retry_budget: int = 4  # transient-failure retries allowed per turn, all calls together
    handoff: HandoffConfig = Field(default_factory=HandoffConfig)
    # Where the agent's customers are: "tomorrow" and "next Friday" are read in this time zone.
    timezone: str = "UTC"
    # The languages the agent serves (BCP 47 tags); the first is its default. A customer is
    # answered, and every line the engine writes itself, in the language they write in.
    languages: tuple[str, ...] = ("en",)
    # The engine's own lines as this agent words them, per language: language → catalog key →
    # line (`engine.language.lines`; the keys of engine/language/catalogs/en.yaml). A line not
    # given here is the shipped catalog's. `no_match_response`, `unsupported_media_response` and
    # `handoff.message` / `unavailable_message`, when changed, are the default language's.
    messages: dict[str, dict[str, str]] = Field(default_factory=dict)

    @field_validator("messages")
    @classmethod
    def _message_languages(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for tag, lines in value.items():
            key = normalize_tag(tag)
            if key in out:
                raise ValueError(f"messages: the language {key} is given twice ({tag!r})")
            out[key] = dict(lines)
        return out

    @field_validator("languages")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("an agent serves at least one language (e.g. [en])")
        tags = tuple(normalize_tag(t) for t in value)
        if len(set(tags)) != len(tags):
            raise ValueError(f"a language is listed twice: {list(value)}")
        return tags

    def model_for(self, purpose: LLMPurpose) -> str:
        return self.models.get(purpose, self.default_model)

    def lines(self) -> Lines:
        """The engine's lines for this agent: `messages` over the shipped catalogs, and the
        single-language reply fields, when changed, as lines of its default language."""
        default = self.languages[0]
        overrides = {tag: dict(lines) for tag, lines in self.messages.items()}
        legacy = {key: text for key, text in self.worded_replies().items() if text is not None}
        if legacy:
            overrides[default] = {**legacy, **overrides.get(default, {})}
        return Lines(overrides, default)

    def worded_replies(self) -> Mapping[str, str | None]:
        """The reply fields that predate `messages`, by catalog key: their text when the agent
        changed it from the default, else None."""
        fields = type(self).model_fields
        handoff = HandoffConfig.model_fields
        pairs = {
            "no_match": (self.no_match_response, fields["no_match_response"].default),
            "unsupported_media": (
                self.unsupported_media_response,
                fields["unsupported_media_response"].default,
            ),
            "handoff": (self.handoff.message, handoff["message"].default),
            "handoff_unavailable": (
                self.handoff.unavailable_message,
                handoff["unavailable_message"].default,
            ),
        }
        return {key: (text if text != default else None) for key, (text, default) in pairs.items()}
