"""Composition: `ComposedReply` (fluid) and `CannedChoice` (canned modes).

Each instruction of `engine.compose.build_compose_prompt` is an imperative addressed to the agent;
it is turned into words for the customer by a handful of sentence patterns:

    Ask for the username and the password      → Could you tell me your username and password?
    Ask which stock the customer is interested in → Which stock are you interested in?
    Ask the customer to confirm the transfer   → Could you please confirm the transfer?
    Tell the customer the current price        → The current price for AAPL is 187.20.
    Tell the customer the transfer is complete → The transfer is complete.
    Tell the customer to call the hotline      → Please call the hotline.
    Offer to look up a price or log the customer in → I can look up a price or log you in. …
    Confirm that no money was moved            → I can confirm that no money was moved.
    Read the transfer back                     → To confirm: destination account id 1234324, …

Values the customer already gave are not asked again; questions for missing tool arguments come
last; tool results no instruction used are summarised. `applied` lists the instructions that
produced a sentence. A canned choice is the approved reply most similar to what the fluid reply
would say (null when none is close).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.compose import CannedChoice, ComposedReply
from infra.offline.language import (
    answer_polarity,
    is_abandonment,
    is_greeting,
    is_thanks,
    raw_cosine,
    similarity,
    stem,
    word_set,
    words,
)
from infra.offline.prompt import (
    SharedContext,
    ToolData,
    UnrecognizedPrompt,
    flatten,
    optional_section,
    parse_shared_context,
    require,
)

PARSER = "composition parser (infra/offline/compose.py)"
CANNED_MIN_SIMILARITY = 0.3
_INSTRUCTIONS = "Instructions for this reply (follow all that still make sense):\n"
_QUESTIONS = "You cannot proceed without this information; ask the customer for it:\n"
_VALUES = re.compile(r"^Values the customer already gave: (?P<json>.*)$", re.M)
_APPROVED = "Approved replies (already filled in):\n"
_ITEM = re.compile(r"^- \[(?P<handle>[it]\d+)\] (?P<text>.*)$")
_END_OF_PART = ("\n\nYou cannot proceed", "\n\nNotes:\n", "\n\nRules:", "\n\nApproved replies")


@dataclass(frozen=True)
class ComposeRequest:
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


# --------------------------------------------------------------------------------------------------
# Composing


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


@dataclass
class _Reply:
    request: ComposeRequest
    sentences: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)  # words of things already asked for

    def add(self, sentence: str | None) -> bool:
        if not sentence:
            return False
        sentence = _finish(sentence)
        if sentence not in self.sentences:
            self.sentences.append(sentence)
        return True


def _compose(request: ComposeRequest) -> tuple[str, list[str]]:
    reply = _Reply(request)
    for note in request.notes:
        reply.add(_note_sentence(note))
    for handle, text in request.instructions:
        if reply.add(phrase_instruction(text, reply)):
            reply.applied.append(handle)
    results = request.context.recent_tool_results()
    if results and not request.instructions and not any("failed" in n for n in request.notes):
        reply.add(data_summary(results))  # nothing asked for the data: still show what was found
    for question in request.questions:
        reply.add(_question_sentence(question, reply))
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


def _finish(sentence: str) -> str:
    text = " ".join(sentence.split()).strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else f"{text}."


# --------------------------------------------------------------------------------------------------
# Instruction → sentence

_AGENT_VERBS = (
    "ask|request|collect|get|obtain|gather|tell|inform|let|notify|explain|say|mention|remind|state|"
    "report|give|provide|share|show|present|quote|read|summarize|summarise|repeat|recap|confirm|"
    "offer|greet|welcome|thank|apologize|apologise|suggest|recommend|use|check|verify|look|"
    "lookup|fetch|retrieve|find|search|run|call|process|execute|perform|help|answer|respond|reply"
)
_SPLIT_AND = re.compile(rf",? and (?=(?:{_AGENT_VERBS})\b)", re.I)
_CLAUSE_VERB = re.compile(
    r"\b(is|are|was|were|has|have|had|will|would|can|could|cannot|can't|does|did|do|should|"
    r"must|may|might|isn't|aren't|wasn't|won't|doesn't|didn't|been|being)\b",
    re.I,
)
_PERSONAL = word_set(
    "username password name email phone address pin birth passport id number account"
)


def phrase_instruction(text: str, reply: _Reply) -> str | None:
    """Customer-facing words for one instruction (None when there is nothing to say)."""
    body = re.sub(r"^\([^)]*\)\s*", "", text.strip())  # the journey title prefix
    quoted = re.search(
        r"\b(?:say|tell|reply|respond|answer)\b[^\"“]*[\"“]([^\"”]+)[\"”]", body, re.I
    )
    if quoted:
        return quoted.group(1)
    sentences = [s for s in re.split(r"(?<=[.;])\s+", body) if s.strip()]
    parts = [p for s in sentences for p in _SPLIT_AND.split(s.strip().rstrip(".;"))]
    phrased = [_phrase_part(to_customer(p.strip()), reply) for p in parts if p.strip()]
    kept = [_finish(p) for p in phrased if p]
    return " ".join(kept) if kept else None


def to_customer(text: str) -> str:
    """Re-address an instruction: the agent's "you" → "I", "the customer" → "you"."""
    agent = "\x00"
    t = text
    for pattern, repl in (
        (r"\byou're\b", f"{agent}I'm"),
        (r"\byou are\b", f"{agent}I am"),
        (r"\byourself\b", f"{agent}myself"),
        (r"\byours\b", f"{agent}mine"),
        (r"\byour\b", f"{agent}my"),
        (r"(^|\bthat |\bif |\bwhen |\band |\bso |, )you\b", rf"\1{agent}I"),
        (r"\byou\b", f"{agent}me"),
    ):
        t = re.sub(pattern, repl, t, flags=re.I)
    who = r"(?:the (?:customer|user|client|caller)|they|he or she)"
    for pattern, repl in (
        (r"\bthe (?:customer|user|client|caller)'s\b", "your"),
        (r"\btheir\b", "your"),
        (r"\bthemselves\b", "yourself"),
        (rf"\b{who} (?:is|are)\b", "you are"),
        (rf"\b{who} (?:was|were)\b", "you were"),
        (rf"\b{who} (?:has|have)\b", "you have"),
        (rf"\b{who} (?:does|do)\b", "you do"),
        (r"\bthey're\b", "you're"),
        (rf"\b{who}\b", "you"),
        (r"\bthem\b", "you"),
    ):
        t = re.sub(pattern, repl, t, flags=re.I)
    t = re.sub(
        r"\byou (want|need|like|prefer|own|request|give|provide|confirm|agree|choose|select|mean|"
        r"wish|hold|use|plan|expect|ask)s\b",
        r"you \1",
        t,
    )
    t = re.sub(r"\byou tries\b", "you try", t)
    return t.replace(f"{agent}", "")


def _phrase_part(part: str, reply: _Reply) -> str | None:
    m = re.match(r"^(?P<verb>\w+)(?: (?P<rest>.*))?$", part)
    if m is None:
        return part
    verb = m["verb"].lower()
    politely = bool(re.match(r"^politely\b", m["rest"] or ""))
    rest = re.sub(r"^politely\s+", "", (m["rest"] or "").strip())
    if verb not in {"help", "let"}:
        rest = _drop_addressee(rest)
    if verb in {"ask", "request", "collect", "get", "obtain", "gather"}:
        return _ask(rest, reply)
    if verb == "let" and rest.startswith("you know"):
        return _tell(rest.removeprefix("you know").strip(), reply)
    if verb in {"say", "explain", "tell"} and politely and _LIMITATION.search(rest):
        said = _tell(rest, reply)
        return f"Sorry, {said}" if said else None
    if verb in _TELL_VERBS:
        return _tell(rest, reply)
    if verb in {"read", "summarize", "summarise", "repeat", "recap"}:
        return _recap(reply)
    if verb == "confirm":
        return _confirm(rest, reply)
    if verb == "offer":
        if rest.startswith("to "):
            return f"I can {rest[3:]}. What would you like to do?"
        # "Offer the free times" after a lookup: offer what the lookup found, not the words.
        found = _data_sentence(rest, reply) if reply.request.context.recent_tool_results() else None
        return found or f"I can offer {rest}"
    if verb in {"greet", "welcome"}:
        return "Hello! How can I help you today?"
    if verb == "thank":
        return f"Thank you {rest}!" if rest.startswith("for ") else "Thank you!"
    if verb in {"apologize", "apologise"}:
        return f"I'm sorry {rest}" if rest else "I'm sorry."
    if verb in {"suggest", "recommend"}:
        return f"I'd suggest {rest}" if rest else None
    if verb == "use" and rest.lower().startswith("the results of"):
        return _results_of(rest[len("the results of") :], reply)
    if verb in {"do", "don't", "never", "avoid"}:
        return None  # a constraint on the reply, not something to say
    if verb in _ACTION_VERBS:
        if reply.request.context.recent_tool_results():
            return None  # the results speak for the action
        return f"I'll {verb} {rest}".strip()
    if verb == "help":
        return f"I'm happy to help {rest}".strip()
    return f"I'll {part[0].lower()}{part[1:]}"


_TELL_VERBS = word_set(
    "tell inform notify explain say mention remind state report give provide share show present "
    "quote answer respond reply"
)
_ACTION_VERBS = word_set(
    "check verify look lookup fetch retrieve find search run call process execute perform"
)
_AUX = word_set("are were have had can could will would should may might must do did don't didn't")
_LIMITATION = re.compile(r"\b(only|cannot|can't|unable|not able|no longer)\b", re.I)


def _drop_addressee(rest: str) -> str:
    """Drop the addressee: (tell) "you the price" → "the price"; (confirm) "you are logged in"
    keeps its subject."""
    m = re.match(r"^(?:to )?you\b,?\s*(?P<after>.*)$", rest)
    if m is None:
        return rest
    following = m["after"].split(" ", 1)[0].lower() if m["after"] else ""
    if rest.startswith("you") and following in _AUX:
        return rest
    return m["after"]


def _ask(rest: str, reply: _Reply) -> str | None:
    rest = re.sub(r"^(?:you|the customer)\s+", "", rest)
    if rest.startswith("for "):
        return _ask_for(rest[4:], reply)
    if rest.startswith("to "):
        return f"Could you please {rest[3:]}?"
    if re.match(r"^(whether|if)\b", rest):
        return _yes_no_question(re.sub(r"^(whether|if)\s+", "", rest))
    if re.match(r"^(which|what|how|when|where|who|why|whose)\b", rest):
        return _wh_question(rest)
    if rest.startswith("about "):
        return f"Could you tell me {rest}?"
    return _ask_for(rest, reply) if rest else "How can I help you?"


def _ask_for(things: str, reply: _Reply) -> str:
    """A question for the things listed ("the username and the password") not given yet."""
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", things)]
    parts = [p for p in parts if p]
    given = {_norm_key(k) for k in reply.request.collected}
    open_parts = [p for p in parts if not _is_given(p, given)] or parts
    for p in open_parts:
        reply.asked.update(_key_words(p))
    nouns = [_noun(p) for p in open_parts]
    if all(n.startswith("your ") for n in nouns) and len(nouns) > 1:
        nouns = [nouns[0]] + [n.removeprefix("your ") for n in nouns[1:]]
    return f"Could you tell me {_join(nouns)}?"


def _noun(phrase: str) -> str:
    """How to name a thing asked for: "the username" → "your username", "the amount" stays."""
    bare = re.sub(r"^(the|a|an|your|my)\s+", "", phrase)
    personal = bool(set(bare.lower().split()) & _PERSONAL) and not bare.lower().startswith(
        ("destination", "recipient", "target")
    )
    if re.match(r"^(your|my)\b", phrase, re.I) or personal:
        return f"your {bare}"
    return bare if re.match(r"^(which|what|how|any|some)\b", bare) else f"the {bare}"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _key_words(phrase: str) -> set[str]:
    return {stem(w) for w in words(phrase)} - {"the", "a", "an", "your", "my", "of"}


def _norm_key(key: str) -> frozenset[str]:
    return frozenset(stem(w) for w in re.split(r"[_\s.\-]+", key.lower()) if w)


def _is_given(phrase: str, given: set[frozenset[str]]) -> bool:
    wanted = _key_words(phrase)
    return bool(wanted) and any(wanted <= key or key <= wanted for key in given if key)


def _wh_question(clause: str) -> str:
    """A wh-clause as a question: "which stock you are interested in" → "Which stock are you
    interested in?"."""
    m = re.match(r"^(?P<wh>.+?)\s+you\s+(?P<verb>\S+)(?P<rest>.*)$", clause)
    if m is None:
        if len(clause.split()) <= 3:
            return f"{clause} do you mean?"
        return f"Could you tell me {clause}?"
    wh, verb, rest = m["wh"], m["verb"], m["rest"]
    if verb in {"are", "were", "can", "could", "will", "would", "should", "may", "might", "must"}:
        return f"{wh} {verb} you{rest}?"
    if verb == "have" and re.match(r"^\s+\w+ed\b", rest):
        return f"{wh} have you{rest}?"
    return f"{wh} do you {verb}{rest}?"


def _yes_no_question(clause: str) -> str:
    """A whether-clause as a question: "you want a receipt" → "Would you like a receipt?"."""
    m = re.match(r"^you\s+(?P<verb>\S+)(?P<rest>.*)$", clause)
    if m is None:
        return f"Could you tell me whether {clause}?"
    verb, rest = m["verb"], m["rest"]
    if verb == "want":
        return f"Would you like{rest}?"
    if verb == "have" and not re.match(r"^\s+\w+ed\b", rest):
        return f"Do you have{rest}?"
    if verb in {"are", "were", "can", "could", "will", "would", "should", "have"}:
        return f"{verb} you{rest}?"
    return f"Do you {verb}{rest}?"


def _tell(rest: str, reply: _Reply) -> str | None:
    rest = re.sub(r"^(?:you|the customer)\s+", "", rest)
    if rest.startswith("whether "):
        return _yes_no_from_results(rest[len("whether ") :], reply)
    if rest.startswith("to "):
        return f"Please {rest[3:]}"
    if rest.startswith("that "):
        return rest[5:]
    if rest.startswith(("about ", "of ")):
        rest = rest.split(" ", 1)[1]
    if _CLAUSE_VERB.search(rest):
        return rest
    return _data_sentence(rest, reply)


def _yes_no_from_results(clause: str, reply: _Reply) -> str | None:
    """ "whether you are now logged in" + a tool's {"authenticated": true} → "You are now logged
    in"; false → "You are not now logged in". Without a yes/no in the data, say nothing."""
    flags = [
        v
        for r in reply.request.context.recent_tool_results()
        if isinstance(r.data, dict)
        for v in r.data.values()
        if isinstance(v, bool)
    ]
    if not flags:
        return None
    if all(flags):
        return clause
    negated = re.sub(r"\b(am|are|is|was|were|can|will|have|has)\b", r"\1 not", clause, count=1)
    return re.sub(r"\bnot (now|already|currently)\b", "not", negated)  # "you are not logged in"


def _confirm(rest: str, reply: _Reply) -> str | None:
    rest = re.sub(r"^that\s+", "", rest)
    if not rest:
        return "Done."
    if _CLAUSE_VERB.search(rest):
        return f"I can confirm that {rest}"
    return _data_sentence(rest, reply) or f"Could you confirm {rest}?"


_PRIVATE = re.compile(r"pass(word|code|phrase)?|\bpin\b|secret|otp|user(name)?|login", re.I)


def _recap(reply: _Reply) -> str | None:
    """The values the customer gave, read back (never passwords or login names)."""
    values = {
        k: v
        for k, v in reply.request.collected.items()
        if v not in (None, "") and not _PRIVATE.search(_human(k))
    }
    if not values:
        return None
    listed = ", ".join(f"{_human(k)} {_value_text(v)}" for k, v in values.items())
    return f"To confirm: {listed}"


# --------------------------------------------------------------------------------------------------
# Tool data in sentences

_IDENTIFIERS = (
    "symbol",
    "ticker",
    "account_name",
    "account",
    "name",
    "account_id",
    "order_id",
    "id",
)


def _data_sentence(noun_phrase: str, reply: _Reply) -> str | None:
    """A noun phrase filled from tool data: "the current price" + {"symbol": "AAPL", "price":
    187.2} → "The current price for AAPL is 187.2". Falls back to a summary of this turn's tool
    data, or to the collected values."""
    results = reply.request.context.recent_tool_results()
    values: dict[str, Any] = {}
    for r in results:
        if isinstance(r.data, dict) and not r.data.get("error"):
            values.update(flatten(r.data))
    wanted = _key_words(noun_phrase) - {"current", "latest", "new", "its", "their", "your"}
    # The head noun decides ("the balance of the account" is about the balance, not the
    # account), so keys naming it win over keys that merely share a word.
    head = _head_noun(noun_phrase)
    match = next((k for k in values if head in _norm_key(k.rsplit(".", 1)[-1])), None)
    if match is None:
        match = next((k for k in values if _norm_key(k.rsplit(".", 1)[-1]) & wanted), None)
    if match is not None:
        subject = re.sub(r"^(its|their|your|my)\s+", "the ", noun_phrase.strip())
        if not re.match(r"^(the|a|an)\b", subject):
            subject = f"the {subject}"
        ident = next(
            (values[k] for k in _IDENTIFIERS if k in values and k != match and values[k] != ""),
            None,
        )
        suffix = f" for {_value_text(ident)}" if ident is not None else ""
        currency = values.get("currency")
        amount = _value_text(values[match]) + (f" {currency}" if currency else "")
        plural = head.endswith("s") and not head.endswith("ss") and "," in amount
        verb = "are" if plural else "is"  # "the free times are 09:00, 11:30"
        return f"{subject}{suffix} {verb} {amount}"
    if results:
        return data_summary(results)
    collected = reply.request.collected
    key = next((k for k in collected if _norm_key(k) & wanted), None)
    if key is not None:
        return f"the {_human(key)} is {_value_text(collected[key])}"
    return None


_DETERMINERS = {"the", "a", "an", "its", "their", "your", "my", "current", "latest", "new"}


def _head_noun(phrase: str) -> str:
    """The word a noun phrase is about: the last word before "of"/"for" ("the balance of the
    account" → "balance"), else its last word ("the current price" → "price")."""
    words = [w for w in re.findall(r"[a-z]+", phrase.lower()) if w not in _DETERMINERS]
    for i, word in enumerate(words):
        if word in {"of", "for", "in", "on"} and i > 0:
            return words[i - 1]
    return words[-1] if words else ""


def _results_of(tools: str, reply: _Reply) -> str | None:
    names = {n.strip() for n in tools.split(",")}
    results = [r for r in reply.request.context.recent_tool_results() if r.tool in names]
    return data_summary(results) if results else None


def data_summary(results: tuple[ToolData, ...] | list[ToolData]) -> str | None:
    """Tool data in words, never as a raw structure: a record as "the symbol is MSFT, the price is
    410", a list as its items' labels ("small, medium or large"). Errors are left to the notes."""
    parts = []
    for r in results:
        if r.data is None or (isinstance(r.data, dict) and r.data.get("error")):
            continue
        if isinstance(r.data, list):
            items = [_value_text(v) for v in r.data[:_MAX_ITEMS]]
            more = len(r.data) - _MAX_ITEMS
            parts.append(_join(items + ([f"{more} more"] if more > 0 else [])))
        elif isinstance(r.data, dict):
            shown = [(k, v) for k, v in r.data.items() if v not in (None, "", [], {})][:6]
            parts.append(", ".join(_fact(k, v) for k, v in shown))
        else:
            parts.append(_value_text(r.data))
    parts = [p for p in parts if p]
    if not parts:
        return None
    return "Here is what I found: " + "; ".join(parts)


def _fact(key: str, value: Any) -> str:
    """One field of a record: "the price is 410"; a flag as "authenticated: yes"."""
    if isinstance(value, bool):
        return f"{_human(key)}: {_value_text(value)}"
    return f"the {_human(key)} is {_value_text(value)}"


_MAX_ITEMS = 8
_LABEL_KEYS = ("label", "name", "title", "description", "id")


def _human(key: str) -> str:
    """A key for the customer: "to_account_id" → "destination account id"."""
    text = re.sub(r"[_.]+", " ", key).strip()
    text = re.sub(r"^to\b", "destination", text)
    return re.sub(r"^from\b", "source", text)


def _value_text(value: Any) -> str:
    """A value as a customer reads it: yes/no, 300 (not 300.0), a record by its label, a list as
    its items — never a Python or JSON structure."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        label = next((value[k] for k in _LABEL_KEYS if value.get(k) not in (None, "")), None)
        if label is not None and not isinstance(label, dict | list):
            return _value_text(label)
        scalars = [(k, v) for k, v in value.items() if not isinstance(v, dict | list)][:4]
        return ", ".join(f"{_human(k)} {_value_text(v)}" for k, v in scalars)
    if isinstance(value, list | tuple):
        return _join([_value_text(v) for v in value[:_MAX_ITEMS]])
    return str(value)


# --------------------------------------------------------------------------------------------------
# Questions and notes from the engine


_PICK = re.compile(
    r"^(?:Ask the customer to pick|The customer still has to pick) one of"
    r"(?: these options)?: (?P<labels>.*)$"
)


def _question_sentence(question: str, reply: _Reply) -> str | None:
    """The engine's questions (`missing_argument_question`, invalid details, a selector's
    options) as words for the customer; a field asked for by an instruction is not asked twice."""
    missing = re.match(r"^To (?P<goal>.*?), ask the customer for: (?P<fields>.*)$", question)
    if missing:
        fields = re.split(r",\s*(?![^()]*\))", missing["fields"])  # commas outside parentheses
        names = [re.sub(r"\s*\(.*\)$", "", f).strip() for f in fields]
        names = [n for n in names if not (_key_words(_human(n)) <= reply.asked)]
        if not names:
            return None
        reply.asked.update(w for n in names for w in _key_words(_human(n)))
        return f"Could you tell me {_join([_noun(_human(n)) for n in names])}?"
    invalid = re.match(
        r"^The details for (?P<tool>\S+) were not valid \((?P<why>.*)\); ask again\.$", question
    )
    if invalid:
        what = _human(invalid["tool"])
        return f"Sorry, the details for {what} did not look right. Could you give them again?"
    if question.startswith("Before anything is done, the customer must confirm an action"):
        # The engine appends the exact action and the yes/no question itself.
        return "Before I go ahead, I need your confirmation."
    pick = _PICK.match(question)
    if pick:
        return f"Please pick one of these options: {pick['labels']}"
    return phrase_instruction(question, reply)


def _note_sentence(note: str) -> str | None:
    failed = re.match(
        r"^tool (?P<tool>\S+) failed: (?P<error>.*?)(?P<retry>\. This did NOT happen.*)?$", note
    )
    if failed:
        sentence = (
            f"Sorry, I could not complete {_human(failed['tool'])} just now ({failed['error']})"
        )
        offer = failed["retry"] and "offer to try again" in failed["retry"]
        return sentence + (". Would you like me to try again?" if offer else "")
    refused = re.match(r"^The value given for (?P<name>.+?) was refused: it (?P<why>.+?)\. ", note)
    if refused:
        return f"Sorry, the {_human(refused['name'])} {refused['why']}"
    waiting = re.match(
        r"^Before '(?P<goal>[^']+)' the customer must complete '(?P<first>[^']+)'", note
    )
    if waiting:
        return f"Before the {waiting['goal'].lower()}, we need to take care of {waiting['first'].lower()} first"
    return None
