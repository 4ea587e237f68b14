"""Instructions, questions and notes of a composition prompt turned into words for the customer.

Each instruction of `engine.compose.build_compose_prompt` is an imperative addressed to the agent;
it is turned into words for the customer by a handful of sentence patterns:

    Ask for the username and the password      → Could you tell me your username and password?
    Ask which stock the customer is interested in → Which stock are you interested in?
    Ask the customer to confirm the transfer   → Could you please confirm the transfer?
    Tell the customer the current price        → The current price for AAPL is 187.20.
    Tell the customer the transfer is complete → The transfer is complete.
    Tell the customer the return is started, with its return id
                                               → The return is started, with its return id: the
                                                 return id is R-501.
    Tell the customer where the order is       → Here is what I found: the status is shipped, …
    Tell the customer to call the hotline      → Please call the hotline.
    Offer to look up a price or log the customer in → I can look up a price or log you in. …
    Confirm that no money was moved            → I can confirm that no money was moved.
    Read the transfer back                     → To confirm: destination account id 1234324, …

Values the customer already gave are not asked again. The engine's own questions (a missing tool
argument, invalid details, a confirmation, a selector's options) and notes (a failed tool, a
refused value, a prerequisite journey) have fixed wordings, each read back into a sentence.
"""

from __future__ import annotations

import re

from infra.offline.compose_request import ReplyDraft, finish_sentence
from infra.offline.data_sentences import (
    clause_with_data,
    data_sentence,
    human_key,
    join_items,
    key_words,
    norm_key,
    results_of,
    value_text,
)
from infra.offline.language import word_set

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


def phrase_instruction(text: str, reply: ReplyDraft) -> str | None:
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
    kept = [finish_sentence(p) for p in phrased if p]
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


def _phrase_part(part: str, reply: ReplyDraft) -> str | None:
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
        found = data_sentence(rest, reply) if reply.request.context.recent_tool_results() else None
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
        return results_of(rest[len("the results of") :], reply)
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


def _ask(rest: str, reply: ReplyDraft) -> str | None:
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


def _ask_for(things: str, reply: ReplyDraft) -> str:
    """A question for the things listed ("the username and the password") not given yet."""
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", things)]
    parts = [p for p in parts if p]
    given = {norm_key(k) for k in reply.request.collected}
    open_parts = [p for p in parts if not _is_given(p, given)] or parts
    for p in open_parts:
        reply.asked.update(key_words(p))
    nouns = [_noun(p) for p in open_parts]
    if all(n.startswith("your ") for n in nouns) and len(nouns) > 1:
        nouns = [nouns[0]] + [n.removeprefix("your ") for n in nouns[1:]]
    return f"Could you tell me {join_items(nouns)}?"


def _noun(phrase: str) -> str:
    """How to name a thing asked for: "the username" → "your username", "the amount" stays."""
    bare = re.sub(r"^(the|a|an|your|my)\s+", "", phrase)
    personal = bool(set(bare.lower().split()) & _PERSONAL) and not bare.lower().startswith(
        ("destination", "recipient", "target")
    )
    if re.match(r"^(your|my)\b", phrase, re.I) or personal:
        return f"your {bare}"
    return bare if re.match(r"^(which|what|how|any|some)\b", bare) else f"the {bare}"


def _is_given(phrase: str, given: set[frozenset[str]]) -> bool:
    wanted = key_words(phrase)
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


def _tell(rest: str, reply: ReplyDraft) -> str | None:
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
        return clause_with_data(rest, reply)
    return data_sentence(rest, reply)


def _yes_no_from_results(clause: str, reply: ReplyDraft) -> str | None:
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


def _confirm(rest: str, reply: ReplyDraft) -> str | None:
    rest = re.sub(r"^that\s+", "", rest)
    if not rest:
        return "Done."
    if _CLAUSE_VERB.search(rest):
        return f"I can confirm that {rest}"
    return data_sentence(rest, reply) or f"Could you confirm {rest}?"


_PRIVATE = re.compile(r"pass(word|code|phrase)?|\bpin\b|secret|otp|user(name)?|login", re.I)


def _recap(reply: ReplyDraft) -> str | None:
    """The values the customer gave, read back (never passwords or login names)."""
    values = {
        k: v
        for k, v in reply.request.collected.items()
        if v not in (None, "") and not _PRIVATE.search(human_key(k))
    }
    if not values:
        return None
    listed = ", ".join(f"{human_key(k)} {value_text(v)}" for k, v in values.items())
    return f"To confirm: {listed}"


# --------------------------------------------------------------------------------------------------
# Questions and notes from the engine


_PICK = re.compile(
    r"^(?:Ask the customer to pick|The customer still has to pick) one of"
    r"(?: these options)?: (?P<labels>.*)$"
)


def question_sentence(question: str, reply: ReplyDraft) -> str | None:
    """The engine's questions (`missing_argument_question`, invalid details, a selector's
    options) as words for the customer; a field asked for by an instruction is not asked twice."""
    missing = re.match(r"^To (?P<goal>.*?), ask the customer for: (?P<fields>.*)$", question)
    if missing:
        fields = re.split(r",\s*(?![^()]*\))", missing["fields"])  # commas outside parentheses
        names = [re.sub(r"\s*\(.*\)$", "", f).strip() for f in fields]
        names = [n for n in names if not (key_words(human_key(n)) <= reply.asked)]
        if not names:
            return None
        reply.asked.update(w for n in names for w in key_words(human_key(n)))
        return f"Could you tell me {join_items([_noun(human_key(n)) for n in names])}?"
    invalid = re.match(
        r"^The details for (?P<tool>\S+) were not valid \((?P<why>.*)\); ask again\.$", question
    )
    if invalid:
        what = human_key(invalid["tool"])
        return f"Sorry, the details for {what} did not look right. Could you give them again?"
    if question.startswith("Before anything is done, the customer must confirm an action"):
        # The engine appends the exact action and the yes/no question itself.
        return "Before I go ahead, I need your confirmation."
    pick = _PICK.match(question)
    if pick:
        return f"Please pick one of these options: {pick['labels']}"
    return phrase_instruction(question, reply)


def note_sentence(note: str) -> str | None:
    """The engine's notes (a failed tool, a refused value, a journey waiting for another) as words
    for the customer; None for a note the customer need not hear about."""
    failed = re.match(
        r"^tool (?P<tool>\S+) failed: (?P<error>.*?)(?P<retry>\. This did NOT happen.*)?$", note
    )
    if failed:
        sentence = (
            f"Sorry, I could not complete {human_key(failed['tool'])} just now ({failed['error']})"
        )
        offer = failed["retry"] and "offer to try again" in failed["retry"]
        return sentence + (". Would you like me to try again?" if offer else "")
    refused = re.match(r"^The value given for (?P<name>.+?) was refused: it (?P<why>.+?)\. ", note)
    if refused:
        return f"Sorry, the {human_key(refused['name'])} {refused['why']}"
    waiting = re.match(
        r"^Before '(?P<goal>[^']+)' the customer must complete '(?P<first>[^']+)'", note
    )
    if waiting:
        return f"Before the {waiting['goal'].lower()}, we need to take care of {waiting['first'].lower()} first"
    return None
