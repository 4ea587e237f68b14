"""A prompt that knows where its stable prefix ends.

Every prompt builder lays its text out stable part first — the role, the agent and its glossary,
the shared rules: text that is byte-identical on every turn of the same agent version — and the
turn's content after it (facts, the conversation, this turn's tool results, the language note).
`Prompt` is that text as a `str` (so every port, adapter and fake that takes a `str` takes it
unchanged) carrying `stable_chars`, the length of that stable prefix. An adapter that can mark a
cache boundary (Bedrock's Converse `cachePoint`, `infra.llm.bedrock_llm`) places it there; the
others simply see the text.

Only a builder sets the mark, and only around text it wrote itself: the boundary never moves
with the customer's words. Operations on the text (`+`, slicing, `strip`) give a plain `str`
without a mark, which is always safe (no cache point); `extended` is how a repair appends to a
prompt and keeps the mark.
"""

from __future__ import annotations

from collections.abc import Sequence

PARAGRAPH = "\n\n"


class Prompt(str):
    """Prompt text whose first `stable_chars` characters are its stable prefix."""

    stable_chars: int

    def __new__(cls, text: str, stable_chars: int = 0) -> Prompt:
        if not 0 <= stable_chars <= len(text):
            raise ValueError(
                f"stable prefix of {stable_chars} characters in a {len(text)}-long text"
            )
        prompt = super().__new__(cls, text)
        prompt.stable_chars = stable_chars
        return prompt

    @property
    def stable_prefix(self) -> str:
        """The text up to the mark (plain `str`)."""
        return str(self)[: self.stable_chars]

    @property
    def turn_part(self) -> str:
        """The text after the mark (plain `str`)."""
        return str(self)[self.stable_chars :]

    def __repr__(self) -> str:
        return f"Prompt({str(self)!r}, stable_chars={self.stable_chars})"


def stable_chars(prompt: str) -> int:
    """The length of `prompt`'s stable prefix: 0 for a plain `str` (nothing is known stable)."""
    return prompt.stable_chars if isinstance(prompt, Prompt) else 0


def stable_then_turn(stable: Sequence[str], turn: Sequence[str], sep: str = PARAGRAPH) -> Prompt:
    """`sep.join([*stable, *turn])`, marked after the stable parts and the separator that
    follows them: the stable prefix is everything before the turn's first character."""
    head = sep.join(stable)
    tail = sep.join(turn)
    if not tail:
        return Prompt(head, len(head))
    if not head:
        return Prompt(tail, 0)
    return Prompt(head + sep + tail, len(head) + len(sep))


def marked(text: str, stable_prefix: str) -> Prompt:
    """`text` marked after `stable_prefix`, which must be how it starts (no mark otherwise: a
    mark is never placed on text it was not computed for)."""
    return Prompt(text, len(stable_prefix) if text.startswith(stable_prefix) else 0)


def extended(prompt: str, suffix: str) -> str:
    """`prompt + suffix`, keeping `prompt`'s mark: its prefix is unchanged (a repair's note)."""
    if isinstance(prompt, Prompt):
        return Prompt(str(prompt) + suffix, prompt.stable_chars)
    return prompt + suffix
