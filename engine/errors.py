"""Errors are types, and their messages tell the user what to fix."""

from __future__ import annotations

from typing import TypeGuard


class WaypointError(Exception):
    """Base of every error Waypoint raises on purpose."""


class InvalidAgentDefinition(WaypointError):
    """An agent definition is inconsistent. `problems` lists every issue found, each naming the
    offending guideline / journey / step, so one run of `waypoint validate` shows them all."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        bullet = "\n  - ".join(self.problems)
        super().__init__(
            f"invalid agent definition ({len(self.problems)} problem(s)):\n  - {bullet}"
        )


class LLMError(WaypointError):
    """An LLM call failed for good (after retries and the repair attempt)."""


class LLMTransientError(LLMError):
    """Rate limit, server error or timeout: worth retrying with backoff."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def is_rate_limit(error: BaseException) -> TypeGuard[LLMTransientError]:
    """Whether `error` is the model saying "too many requests": an `LLMTransientError` with
    status 429, what every adapter raises for its provider's throttling (OpenAI's 429, Bedrock's
    ThrottlingException)."""
    return isinstance(error, LLMTransientError) and error.status == 429


class ModelRateLimited(WaypointError):
    """The model was still rate-limited after the turn's retries, and the deployment defers such
    turns instead of answering with the fallback reply: nothing was committed (no event, no
    reply, no state change) and the messages are to be answered later — the turn worker gives
    them back to the queue with a back-off. Not an `LLMError`: no stage's fallback catches it.
    `retry_after` is the model's last Retry-After, in seconds, when it gave one."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LLMOutputInvalid(LLMError):
    """The model answered, but not with JSON that fits the requested schema."""

    def __init__(self, message: str, *, raw: str = ""):
        super().__init__(message)
        self.raw = raw


class LLMBudgetExceeded(LLMError):
    """The turn's LLM budget (calls or prompt tokens) does not allow this call."""


class SessionConflict(WaypointError):
    """Another turn committed to this session first (its version moved). Reload and retry."""


class ToolArgumentError(WaypointError):
    """A tool call's arguments do not fit the tool's schema."""


class AgentNotFound(WaypointError):
    """No published agent (or version) with that id. Publish it first: `waypoint publish PATH`."""
