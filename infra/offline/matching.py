"""Guideline matching: `GuidelineMatchBatch`, `CustomerDependentBatch`, `DisambiguationVerdict`.

Each condition is judged against the customer's latest message(s) — plus this turn's tool results
for conditions about outcomes — by `language.similarity` (hashing-embedding cosine and concept
overlap), mapped to a 0–10 score. A few kinds of condition are recognised by their wording
instead of their topic: "has not said what they want yet" (a greeting), "thanks / says goodbye",
"asks about something other than X" (an off-topic question), "is frustrated". Thresholds are
conservative: a guideline that only shares a word or two does not apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import pairwise

from engine.matching.guidelines import (
    CustomerDependentBatch,
    CustomerDependentVerdict,
    DisambiguationVerdict,
    GuidelineMatchBatch,
    GuidelineVerdict,
)
from infra.offline.language import (
    answer_polarity,
    concepts,
    condition_polarity,
    data_polarity,
    head_concept,
    in_agent_words,
    is_abandonment,
    is_frustrated,
    is_greeting,
    is_question,
    is_thanks,
    negated_wish,
    request_head,
    similarity,
    words,
)
from infra.offline.prompt import (
    SharedContext,
    UnrecognizedPrompt,
    flatten,
    parse_shared_context,
    section,
)
from infra.offline.slots import Slot
from infra.offline.values import extract_values

PARSER = "guideline matching parser (infra/offline/matching.py)"
APPLIES_AT = 6  # score from which a verdict says applies=True (the engine matches from 5)
REAPPLY_AT = 7  # stricter for guidelines the agent already followed
_LINE = re.compile(r"^- \[(?P<handle>g\d+)\] when: (?P<condition>.*)$")
# `### <title> (g1–g3)`: one group per kind (engine/matching/match_guidance.py names the titles)
_GROUP = re.compile(r"^### (?P<title>[^(\n]+?) \(g\d+(?:–g\d+)?\)$", re.M)
_GROUP_KINDS = {
    "Observations": "observational",
    "Actions not yet taken": "actionable",
    "Actions already taken": "previously_applied",
    "Waiting for the customer": "customer_dependent",
}


@dataclass(frozen=True)
class GuidelineLine:
    handle: str
    condition: str
    action: str = ""
    customer_action: str = ""
    kind: str = "actionable"  # the group it is listed in


@dataclass(frozen=True)
class MatchPrompt:
    kind: str  # the kind of every guideline, or "packed" when the groups differ
    context: SharedContext
    guidelines: tuple[GuidelineLine, ...]


def parse_match_prompt(prompt: str) -> MatchPrompt:
    """A matching-batch prompt: its groups (one per kind, by title), context and guidelines."""
    section(prompt, "\n\nTask: ", parser=PARSER)
    groups = list(_GROUP.finditer(prompt))
    if not groups:
        raise UnrecognizedPrompt(f"offline {PARSER}: the prompt has no '### <kind> (g…)' group")
    found: list[GuidelineLine] = []
    for i, group in enumerate(groups):
        kind = _GROUP_KINDS.get(group["title"].strip())
        if kind is None:
            raise UnrecognizedPrompt(f"offline {PARSER}: unknown group {group['title']!r}")
        end = groups[i + 1].start() if i + 1 < len(groups) else len(prompt)
        body = prompt[group.end() : end]
        block = section(body, "\nGuidelines:\n", parser=PARSER)
        found.extend(_guideline_lines(block, kind))
    kinds = {g.kind for g in found}
    kind = kinds.pop() if len(kinds) == 1 else "packed"
    return MatchPrompt(kind, parse_shared_context(prompt, parser=PARSER), tuple(found))


def _guideline_lines(block: str, kind: str = "actionable") -> tuple[GuidelineLine, ...]:
    lines: list[GuidelineLine] = []
    for raw in block.splitlines():
        head = _LINE.match(raw)
        last = lines[-1] if lines else None
        if head:
            lines.append(GuidelineLine(head["handle"], head["condition"], kind=kind))
        elif last is not None and raw.startswith("    then: "):
            lines[-1] = replace(last, action=raw[10:])
        elif last is not None and raw.startswith("    customer must: "):
            lines[-1] = replace(last, customer_action=raw[19:])
        elif last is not None and raw.strip():
            # a line of a multi-line text (a numbered list in a condition) continues the part
            # it belongs to instead of losing the whole batch
            if last.customer_action:
                lines[-1] = replace(last, customer_action=f"{last.customer_action} {raw.strip()}")
            elif last.action:
                lines[-1] = replace(last, action=f"{last.action} {raw.strip()}")
            else:
                lines[-1] = replace(last, condition=f"{last.condition} {raw.strip()}")
        elif raw.strip():
            raise UnrecognizedPrompt(f"offline {PARSER}: cannot read guideline line {raw!r}")
    if not lines:
        raise UnrecognizedPrompt(f"offline {PARSER}: the batch lists no guidelines")
    return tuple(lines)


# --------------------------------------------------------------------------------------------------
# Judging one condition


def evidence_text(context: SharedContext) -> str:
    return context.latest_customer_text


def _tool_text(context: SharedContext) -> str:
    parts = []
    for result in context.recent_tool_results():
        flat = flatten(result.data)
        parts.append(f"{result.tool} " + " ".join(f"{k} {v}" for k, v in flat.items()))
    return " ".join(parts)


# "The customer is in severe pain or has a dental emergency": either clause is the condition
_OR_CLAUSE = re.compile(
    r",? or (?=(?:is|are|was|were|has|have|had|wants?|asks?|needs?|says?|gives?|mentions?|"
    r"reports?|seems?|does|did|can(?:not|'t)?)\b)",
    re.I,
)


def condition_score(condition: str, context: SharedContext, domain: str = "") -> tuple[int, str]:
    """0–10 and a few words of rationale for `condition` given the latest message(s), both read
    in the agent's words (its glossary's synonyms as their terms). A condition of alternatives
    ("is in severe pain or has a dental emergency") holds as well as its best alternative."""
    alternatives = _OR_CLAUSE.split(condition)
    if len(alternatives) > 1 and _special_condition(condition.lower(), "", domain) is None:
        return max(
            (_clause_score(a, context, domain) for a in alternatives), key=lambda pair: pair[0]
        )
    return _clause_score(condition, context, domain)


def _clause_score(condition: str, context: SharedContext, domain: str) -> tuple[int, str]:
    message = in_agent_words(evidence_text(context), context.glossary)
    condition = in_agent_words(condition, context.glossary)
    message = _agent_as_you(message, condition, context.agent_description)
    special = _special_condition(condition, message, domain)
    if special is not None:
        return special
    if not message and not context.recent_tool_results():
        return 0, "no customer message yet"
    score = similarity(condition, message)
    why = "matches the latest message"
    tools = _tool_text(context)
    if tools and _about_outcome(condition):
        by_tool = similarity(condition, tools)
        polarity = _tool_polarity(context)
        if polarity:
            by_tool += 0.3 if polarity == condition_polarity(condition) else -0.5
        if by_tool > score:
            score, why = by_tool, "matches the tool results"
    if message and condition_polarity(condition) > 0 and negated_wish(message):
        score -= 0.5  # "I don't want to transfer money" is not a wish to transfer money
        why = "the customer declined it"
    if message and _is_cancel_condition(condition) and is_abandonment(message):
        score = max(score, 0.8)
        why = "the customer cancelled"
    points = max(0, min(10, round(score * 10)))
    return points, why if points >= APPLIES_AT else "not in the latest message"


_YOU = re.compile(r"\b(you|your|yours|y'all)\b", re.I)


def _agent_as_you(message: str, condition: str, description: str) -> str:
    """A customer speaking to the agent speaks of the business the agent is: "when are you
    open?" asks "when the clinic is open" when the agent's description names a clinic, and "it's
    an emergency" said to a dental practice is a "dental emergency". The condition's one missing
    word, when the agent's description has it, is added to the message's — when the customer
    said "you", or when the word qualifies the next one, which they said, in the condition and in
    the description alike ("dental emergency", "a dental practice"; never the thing itself, nor a
    verb: "transfers" ends the bank's list of topics, so "send money" is no transfer). Never
    more: the customer must still say everything else the condition is about."""
    if not description:
        return message
    said = concepts(message, topic_only=True)
    wanted = concepts(condition, topic_only=True)
    missing = wanted - said
    if len(wanted) < 2 or len(missing) != 1 or not missing <= concepts(description):
        return message
    word = missing.pop()
    qualifier = _qualifies(word, condition, said) and _qualifies(word, description, None)
    if _YOU.search(message) or qualifier:
        return f"{message} {word}"
    return message


def _qualifies(word: str, text: str, said: set[str] | None) -> bool:
    """Whether `word` comes right before a content word of `text` (of `said`, when given): a
    modifier, as "dental" in "a dental practice" — not a verb or a noun at the end of a list."""
    sequence = [next(iter(concepts(w, topic_only=True)), "") for w in words(text)]
    return any(a == word and b and (said is None or b in said) for a, b in pairwise(sequence))


def _tool_polarity(context: SharedContext) -> int:
    signs = [data_polarity(r.data) for r in context.recent_tool_results()]
    return -1 if -1 in signs else (1 if 1 in signs else 0)


def _about_outcome(condition: str) -> bool:
    return not re.search(r"\b(customer|user|client)\b", condition, re.I) or bool(
        re.search(r"\b(result|succeed\w*|fail\w*|found|returned|balance|available)\b", condition)
    )


def _is_cancel_condition(condition: str) -> bool:
    return bool(re.search(r"\b(cancel\w*|stop\w*|abandon\w*|never ?mind)\b", condition, re.I))


def _special_condition(condition: str, message: str, domain: str) -> tuple[int, str] | None:
    """Conditions about the shape of the conversation rather than a topic: opening, thanks,
    off-topic, frustration, agreement. None when `condition` is an ordinary topical one."""
    lowered = condition.lower()
    if re.search(
        r"(not|n't) (yet )?(said|stated|told|explained|mentioned) what|greet|says? (hello|hi)\b|"
        r"start(s|ed)? the conversation|first message",
        lowered,
    ):
        opening = not message or is_greeting(message)
        return (8, "only a greeting so far") if opening else (1, "the customer said what they want")
    if re.search(r"\bthank|says? (goodbye|bye)|is done|wraps? up|ends? the conversation", lowered):
        return (8, "the customer thanked") if is_thanks(message) else (1, "no thanks or goodbye")
    if re.search(r"other than|unrelated|not related|off[- ]topic|outside", lowered):
        return _off_topic(condition, message, domain)
    if re.search(r"frustrat|angry|upset|annoyed|unhappy|complain", lowered):
        return (8, "the customer sounds upset") if is_frustrated(message) else (1, "calm")
    if (
        re.search(r"\b(agrees?|confirms?|accepts?|says? yes)\b", lowered)
        and len(words(message)) <= 6
    ):
        polarity = answer_polarity(message)
        if polarity:
            return (8, "the customer agreed") if polarity > 0 else (1, "the customer declined")
    return None


def _off_topic(condition: str, message: str, domain: str) -> tuple[int, str]:
    """For "asks about something other than banking": a real question or request sharing no concept
    with the agent's domain (its description, glossary and the other guidelines)."""
    if not message or is_greeting(message) or is_thanks(message) or is_abandonment(message):
        return 1, "not an off-topic request"
    subject = re.split(r"other than|unrelated to|not related to|outside(?: of)?", condition)[-1]
    scope = f"{subject} {domain}"  # the agent's own scope: description, glossary, rules
    request = is_question(message) or len(words(message)) >= 4
    shared = concepts(message, topic_only=True) & concepts(scope, topic_only=True)
    if request and not shared and similarity(scope, message) < 0.2:
        return 8, "nothing to do with the agent's domain"
    return 1, "within the agent's domain"


def _domain(prompt: MatchPrompt, raw: str) -> str:
    glossary = raw.split("Glossary:\n", 1)[1].split("\n\n", 1)[0] if "Glossary:\n" in raw else ""
    rules = " ".join(f"{g.condition} {g.action}" for g in prompt.guidelines)
    return f"{prompt.context.agent_description} {glossary} {rules}"


# --------------------------------------------------------------------------------------------------
# Answers


def match_guidelines(prompt: str) -> GuidelineMatchBatch:
    """Verdicts for an observational, actionable or previously-applied batch."""
    parsed = parse_match_prompt(prompt)
    if parsed.kind == "customer_dependent":
        raise UnrecognizedPrompt(
            f"offline {PARSER}: a customer-dependent batch was asked for GuidelineMatchBatch"
        )
    domain = _domain(parsed, prompt)
    asked_for = _asked_for_elsewhere(parsed)
    verdicts = []
    for g in parsed.guidelines:
        threshold = REAPPLY_AT if g.kind == "previously_applied" else APPLIES_AT
        score, why = condition_score(g.condition, parsed.context, domain)
        if asked_for is not None and score >= APPLIES_AT and _lacks(g, asked_for, parsed):
            score, why = APPLIES_AT - 1, f"the customer asks to {asked_for}, which another fits"
        if g.kind == "previously_applied" and score >= APPLIES_AT and score < REAPPLY_AT:
            why = "nothing clearly new since it was applied"
        verdicts.append(
            GuidelineVerdict(id=g.handle, applies=score >= threshold, score=score, rationale=why)
        )
    return GuidelineMatchBatch(verdicts=verdicts)


def _asked_for_elsewhere(parsed: MatchPrompt) -> str | None:
    """What the customer's request asks to do ("I want to return order A-1002" → return) when it
    is what some condition of the batch is about (its head concept): a condition that shares only
    the request's object ("… where their order is") then does not hold — the agent's own
    conditions say which of its topics the request is. None otherwise."""
    glossary = parsed.context.glossary
    message = in_agent_words(evidence_text(parsed.context), glossary)
    head = request_head(message)
    if head is None:
        return None
    heads = {head_concept(in_agent_words(g.condition, glossary)) for g in parsed.guidelines}
    return head if head in heads else None


def _lacks(g: GuidelineLine, head: str, parsed: MatchPrompt) -> bool:
    """Whether a topical condition is about something other than `head` (a condition about the
    conversation's shape — a greeting, frustration, thanks — holds alongside any request)."""
    condition = in_agent_words(g.condition, parsed.context.glossary)
    if _special_condition(condition, "", "") is not None:
        return False
    return head not in concepts(condition, topic_only=True)


def match_customer_dependent(prompt: str) -> CustomerDependentBatch:
    """The condition still holds unless the customer dropped it; the customer's part is done when
    the latest message supplies something of the asked kind."""
    parsed = parse_match_prompt(prompt)
    message = evidence_text(parsed.context)
    verdicts = []
    for g in parsed.guidelines:
        holds = not (message and is_abandonment(message))
        done = holds and _supplies(g.customer_action or g.action, message)
        verdicts.append(
            CustomerDependentVerdict(
                id=g.handle,
                condition_holds=holds,
                customer_completed=done,
                score=8 if holds else 2,
                rationale="the customer answered" if done else "still waiting for the customer",
            )
        )
    return CustomerDependentBatch(verdicts=verdicts)


_KIND_HINTS = (
    (r"confirm|agree|accept|approve|decline|yes|no\b", "bool"),
    (r"\b(amount|how much|price|sum|number of|how many|quantity)\b", "number"),
    (r"\b(id|number|code|reference)\b", "id"),
    (r"\bdate\b|\bwhen\b", "date"),
    (r"\be-?mail\b", "email"),
)


def _supplies(wanted: str, message: str) -> bool:
    """Whether `message` gives something of the kind `wanted` describes."""
    if not message.strip() or (is_question(message) and not answer_polarity(message)):
        return False
    lowered = wanted.lower()
    for pattern, kind in _KIND_HINTS:
        if not re.search(pattern, lowered):
            continue
        if kind == "bool":
            return answer_polarity(message) != 0 or is_abandonment(message)
        slot = {
            "number": Slot("amount", "number"),
            "id": Slot("reference_id"),
            "date": Slot("date", "date"),
            "email": Slot("email"),
        }[kind]
        return bool(extract_values([slot], message, answering=[slot.name]))
    return True


def disambiguate(prompt: str) -> DisambiguationVerdict:
    """Does the head hold, and which options fit? Two or more close fits → a question."""
    head = re.search(r'first decide whether this holds: "(?P<head>.*?)"\. If it does', prompt)
    if head is None:
        raise UnrecognizedPrompt(f"offline {PARSER}: no head condition in the disambiguation task")
    context = parse_shared_context(prompt, parser=PARSER)
    options = _guideline_lines(section(prompt, "\n\nOptions:\n", parser=PARSER))
    head_score, _ = condition_score(head["head"], context)
    if head_score < APPLIES_AT:
        return DisambiguationVerdict(
            head_applies=False, is_ambiguous=False, rationale="the head does not hold"
        )
    message = in_agent_words(evidence_text(context), context.glossary)
    scored = sorted(
        (
            (
                similarity(
                    in_agent_words(f"{o.condition} {o.action}", context.glossary),
                    message,
                    by_head=False,
                ),
                o,
            )
            for o in options
        ),
        key=lambda pair: pair[0],
        reverse=True,
    )
    best = scored[0][0]
    fitting = [o for s, o in scored if s >= 0.35 and s >= best - 0.15]
    if len(fitting) == 1:
        return DisambiguationVerdict(
            head_applies=True,
            is_ambiguous=False,
            candidate_ids=[fitting[0].handle],
            rationale="one option fits",
        )
    candidates = fitting or [o for _, o in scored]
    return DisambiguationVerdict(
        head_applies=True,
        is_ambiguous=True,
        candidate_ids=[o.handle for o in candidates],
        clarification=clarifying_question([o.condition for o in candidates]),
        rationale="several options fit",
    )


def clarifying_question(conditions: list[str]) -> str:
    """A question naming each option: "Do you want to book a flight, or book a hotel?"."""
    wishes = [customer_wish(c) for c in conditions]
    if len(wishes) == 1:
        return f"Do you want to {wishes[0]}?"
    return f"Do you want to {', '.join(wishes[:-1])}, or {wishes[-1]}?"


def customer_wish(condition: str) -> str:
    """What the customer wants, as a verb phrase: "The customer wants to book a flight" → "book a
    flight"."""
    text = condition.strip().rstrip(".")
    text = re.sub(r"^(the )?(customer|user|client)('s)?\s+", "", text, flags=re.I)
    text = re.sub(
        r"^(wants|would like|wishes|needs|asks|is asking|tries|intends|is trying|is looking)"
        r"( to| for| about)?\s+",
        "",
        text,
        flags=re.I,
    )
    return text[:1].lower() + text[1:]
