"""`Glossed`: the offline model reading a conversation in another language through its author's
glosses — what each customer line means in the agent's own language.

The offline model reads English only (`infra.offline`): in a session in another language it
says so and does nothing else. A conversation test written in, say, Chinese can still run
offline when its author glosses each line (`means:` on a turn, docs/conversation-tests.md): every
prompt the engine builds is shown to the offline model with the customer's lines replaced by
their glosses and the language notes removed, the way a model that understands the language
would read them. Only the model's reading changes: the engine grounds, binds and confirms
values against what the customer actually wrote, and writes its own lines in the customer's
language. The replies the offline model composes stay in English.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from engine.context import LANGUAGE_NOTE
from engine.ports import Generation, SchematicLLM

T = TypeVar("T", bound=BaseModel)

# The compose prompt's "Write the reply in Simplified Chinese, …" and the context's language
# note; both say the customer writes another language than the one the glosses are in.
_WRITE_IN = re.compile(r"Write the reply in [^,\n]+,")
_NOTE = re.compile(rf"\n\n{re.escape(LANGUAGE_NOTE)}[^\n]*")


class Glossed:
    """`inner` (the offline model) shown every prompt with the customer's lines glossed."""

    def __init__(self, inner: SchematicLLM, glosses: Mapping[str, str], language: str) -> None:
        # the longest lines first: a line that contains another is replaced whole
        self.glosses = sorted(glosses.items(), key=lambda kv: -len(kv[0]))
        self.inner = inner
        self.language = language  # the glosses' language's name, e.g. "English"

    def gloss(self, prompt: str) -> str:
        """The prompt as a model that understands the customer's language reads it."""
        read = _NOTE.sub("", prompt)
        read = _WRITE_IN.sub(f"Write the reply in {self.language},", read)
        for said, means in self.glosses:
            # the customer's lines, where the prompt formats quote them: a history line, a
            # field's value, a quoted message
            read = read.replace(f"Customer: {said}\n", f"Customer: {means}\n")
            read = read.replace(f": {said}\n", f": {means}\n")
            read = read.replace(f': {said}"', f': {means}"')
            if read.endswith(f"Customer: {said}"):
                read = read[: -len(said)] + means
        return read

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        return await self.inner.generate(self.gloss(prompt), schema, model=model)
