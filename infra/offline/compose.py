"""Composition: `ComposedReply` (fluid) and `CannedChoice` (canned modes).

A fluid reply is built from the prompt (`infra.offline.compose_request`): the engine's notes
first, then each instruction in words for the customer (`infra.offline.phrasing`), tool results
no instruction used summarised (`infra.offline.data_sentences`), the questions for missing tool
arguments last; small talk when nothing else is to be said. `applied` lists the instructions that
produced a sentence. A canned choice is the approved reply most similar to what the fluid reply
would say (null when none is close).
"""

from __future__ import annotations

import re

from engine.compose import CannedChoice, ComposedReply
from infra.offline.compose_request import PARSER, ComposeRequest, ReplyDraft, parse_compose_prompt
from infra.offline.data_sentences import data_summary
from infra.offline.language import (
    answer_polarity,
    is_abandonment,
    is_greeting,
    is_thanks,
    raw_cosine,
    similarity,
    words,
)
from infra.offline.phrasing import note_sentence, phrase_instruction, question_sentence
from infra.offline.prompt import UnrecognizedPrompt

CANNED_MIN_SIMILARITY = 0.3


def compose_reply(prompt: str) -> ComposedReply:
    request = parse_compose_prompt(prompt)
    message, applied = _compose(request)
    return ComposedReply(message=message, applied=applied)


def choose_canned(prompt: str) -> CannedChoice:
    """The approved reply closest to what a fluid reply would say; null when none is close."""
    request = parse_compose_prompt(prompt)
    if not request.templates:
        raise UnrecognizedPrompt(f"offline {PARSER}: a canned prompt without approved replies")
    intended, applied = _compose(request)
    target = " ".join([intended, *(text for _, text in request.instructions)])
    scores = [
        (max(similarity(text, target), raw_cosine(text, intended)), handle)
        for handle, text in request.templates
    ]
    best_score, best = max(scores, key=lambda pair: pair[0])  # the first of equals wins
    if best_score >= CANNED_MIN_SIMILARITY:
        return CannedChoice(template=best, applied=applied)
    return CannedChoice(template=None, message="" if request.strict else intended, applied=[])


def _compose(request: ComposeRequest) -> tuple[str, list[str]]:
    reply = ReplyDraft(request)
    for note in request.notes:
        reply.add(note_sentence(note))
    for handle, text in request.instructions:
        if reply.add(phrase_instruction(text, reply)):
            reply.applied.append(handle)
    results = request.context.recent_tool_results()
    if results and not request.instructions and not any("failed" in n for n in request.notes):
        reply.add(data_summary(results))  # nothing asked for the data: still show what was found
    for question in request.questions:
        reply.add(question_sentence(question, reply))
    if not reply.sentences:
        reply.add(_small_talk(request.context.latest_customer_text))
    message = " ".join(reply.sentences)
    latest = request.context.latest_customer_text
    if latest and is_greeting(latest) and not re.match(r"^(hello|hi)\b", message, re.I):
        message = f"Hello! {message}"
    elif _acknowledges(request, message):
        message = f"Thanks! {message}"
    return message, reply.applied


def _acknowledges(request: ComposeRequest, message: str) -> bool:
    """Thank the customer for a value they just gave when the reply goes on to a question."""
    latest = request.context.latest_customer_text.lower()
    gave = any(
        str(v).strip() and re.search(rf"(?<!\w){re.escape(str(v).lower())}(?!\w)", latest)
        for v in request.collected.values()
        if not isinstance(v, bool)
    )
    return (
        gave
        and request.context.previous_agent_message is not None
        and message.startswith(("Could you", "Which", "What", "How", "Do you", "Would you"))
    )


def _small_talk(latest: str) -> str:
    if not latest or is_greeting(latest):
        return "Hello! How can I help you today?"
    if is_thanks(latest):
        return "You're welcome! Is there anything else I can help you with?"
    if is_abandonment(latest):
        return "No problem, I've stopped there. Is there anything else I can help you with?"
    if answer_polarity(latest) and len(words(latest)) <= 4:
        return "Great. Is there anything else I can help you with?"
    return "Could you tell me a bit more about what you need?"
