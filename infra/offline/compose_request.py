"""What a composition prompt asks for, read back from it (`ComposeRequest`), and the reply drafted
for it (`ReplyDraft`: its sentences, the instructions they apply, the things already asked for).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from infra.offline.prompt import (
    SharedContext,
    UnrecognizedPrompt,
    optional_section,
    parse_shared_context,
    require,
)

# Error messages name the composition's entry point, `compose.py` (`compose_reply`, `choose_canned`).
PARSER = "composition parser (infra/offline/compose.py)"
_INSTRUCTIONS = "Instructions for this reply (follow all that still make sense):\n"
_QUESTIONS = "You cannot proceed without this information; ask the customer for it:\n"
_VALUES = re.compile(r"^Values the customer already gave: (?P<json>.*)$", re.M)
_APPROVED = "Approved replies (already filled in):\n"
_ITEM = re.compile(r"^- \[(?P<handle>[it]\d+)\] (?P<text>.*)$")
_END_OF_PART = ("\n\nYou cannot proceed", "\n\nNotes:\n", "\n\nRules:", "\n\nApproved replies")


@dataclass(frozen=True)
class ComposeRequest:
    """A composition prompt read back: its instructions, questions, notes, the values already
    collected and (canned modes) the approved replies."""

    context: SharedContext
    instructions: tuple[tuple[str, str], ...]  # (handle, text)
    observations: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    collected: dict[str, Any] = field(default_factory=dict)
    templates: tuple[tuple[str, str], ...] = ()  # canned only: (handle, filled text)
    strict: bool = False


def parse_compose_prompt(prompt: str) -> ComposeRequest:
    """A fluid or canned composition prompt."""
    require(prompt, "\n\nRules:", PARSER)
    if _INSTRUCTIONS not in prompt and "No specific instruction applies" not in prompt:
        raise UnrecognizedPrompt(f"offline {PARSER}: neither instructions nor their absence")
    values = _VALUES.search(prompt)
    try:
        collected = json.loads(values["json"]) if values else {}
    except json.JSONDecodeError as exc:
        raise UnrecognizedPrompt(f"offline {PARSER}: collected values are not JSON") from exc
    return ComposeRequest(
        context=parse_shared_context(prompt, parser=PARSER),
        instructions=_items(optional_section(prompt, _INSTRUCTIONS, _END_OF_PART)),
        observations=_bullets(optional_section(prompt, "What you noticed:\n")),
        questions=_bullets(optional_section(prompt, _QUESTIONS, _END_OF_PART)),
        notes=_bullets(optional_section(prompt, "\n\nNotes:\n", _END_OF_PART)),
        collected=collected,
        templates=_items(optional_section(prompt, _APPROVED, ("\n\nRules:",))),
        strict="never write free text" in prompt,
    )


def _items(block: str | None) -> tuple[tuple[str, str], ...]:
    items: list[tuple[str, str]] = []
    for line in (block or "").splitlines():
        m = _ITEM.match(line)
        if m:
            items.append((m["handle"], m["text"]))
        elif items and line.strip():
            handle, text = items[-1]
            items[-1] = (handle, f"{text} {line.strip()}")
    return tuple(items)


def _bullets(block: str | None) -> tuple[str, ...]:
    return tuple(line[2:] for line in (block or "").splitlines() if line.startswith("- "))


@dataclass
class ReplyDraft:
    """The reply being written for a request: its sentences so far, the instructions they apply,
    the words of what it already asks for."""

    request: ComposeRequest
    sentences: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)  # words of things already asked for

    def add(self, sentence: str | None) -> bool:
        if not sentence:
            return False
        sentence = finish_sentence(sentence)
        if sentence not in self.sentences:
            self.sentences.append(sentence)
        return True


def finish_sentence(sentence: str) -> str:
    """A sentence with its spacing folded, a capital first letter and a final stop."""
    text = " ".join(sentence.split()).strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else f"{text}."
