"""Whether a reply says that an action was done: a deterministic, conservative reading.

An action is known by its words (`ActionWords`, from its tool and the journey steps that run
it): its verbs in every form ("transfer", "transferred", "transferring"; "send", "sent"), the
forms that say it is done, and its nouns ("money", "transfer"; "order", "pizza"). A reply is read
sentence by sentence and clause by clause (punctuation splits clauses: "All set — money's on its
way" is two), after case, curly apostrophes, contractions ("haven't" → "have not") and decimal
points are normalised. A clause claims the action when it says, unhedged:

- a completion word or phrase: "done", "completed", "finished", "processed", "successfully",
  "all set", "taken care of", "went through", "on its way", "in progress", "✅" … ("complete",
  "success" and "successful" only as a predicate — "is complete", "Success!");
- "is / was / has been …" with a completion participle ("sent", "submitted", "placed", "paid" …);
- the action's own verb in the past ("transferred", "I placed") or, after "am / is / are", in
  the progressive ("I'm transferring").

A claim is *specific* when its clause names the action (its verb or a noun), else *bare*
("Done ✅"); who a bare claim is about is the caller's decision (`engine.stages.reply_claims`).

Not a claim (the conservative side): the claim word after a negation in its part of the clause
("I have NOT transferred anything", "nothing has been sent"; "no problem" is no negation), after
a condition anywhere in the clause ("once done", "if", "before", "until", "when"), after a modal
or a wish ("I'll", "would", "want it transferred", "need"), right after "to", "be" or "please"
("to complete", "will be transferred"), or followed by "nothing" / "no"; and any clause of a
question ("Shall I transfer?", "Is it done?" — a sentence ending in "?" that opens like a
question, or has a single clause).

Known limits: a hedge word earlier in an unpunctuated clause hides a claim ("If you wonder the
transfer is complete"); a claim in words outside the lists below ("we're already baking your
pizzas", "the money left your account") is not seen; English only, like the engine's other
lines until they move into message catalogs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p.split()) for p in text.split(";"))


_BARE_WORDS = _words(
    "done completed finished processed executed succeeded successfully accomplished finalized "
    "finalised ✅ ✔ ☑"
)
_PREDICATE_WORDS = _words("complete success successful")  # "is complete", "Success!"
_BARE_PHRASES = _phrases(
    "all set; all done; taken care; went through; gone through; going through; on its way; "
    "on their way; on the way; in progress; under way; underway; good to go"
)
# Said after "is / are / was / were / been / being": the action happened.
_DONE_PARTICIPLES = _words(
    "sent made submitted placed booked paid ordered scheduled created issued initiated executed "
    "processed completed finalized finalised moved wired transferred fulfilled settled credited "
    "debited deposited withdrawn dispatched shipped delivered queued authorized authorised "
    "carried handled arranged registered approved"
)
_BE = _words("is are was were been being s am")
_ADVERBS = _words(
    "now already successfully just all also finally officially fully properly safely indeed a"
)

_NEGATORS = _words("not never nothing no none nobody neither nor without cannot unable nowhere")
# Interjections that carry a "no" but deny nothing.
_NOT_NEGATIONS = _phrases(
    "no problem; no worries; no worry; no doubt; no sweat; no issue; no issues; no trouble; "
    "no hassle; not a problem; never mind"
)
_CONDITIONS = _words(
    "if once when whenever after before until till unless soon whether provided assuming"
)
_MODALS = _words(
    "will would shall could might may want wants wanted wish wishes need needs needed let ask "
    "asks asked asking ready plan plans planning"
)
_RIGHT_BEFORE = _words("to be please")  # "to complete", "will be transferred", "please complete"
_RIGHT_AFTER = _words("nothing no none")  # "I transferred nothing"
_SCOPE_ENDS = _words("and but")  # a negation or a modal reaches no further
_QUESTION_OPENERS = _words(
    "shall should would could can do does did is are was were have has had will may might want "
    "what which how when where who why whose ok okay ready am any anything right correct sure"
)
# A success marker in a sentence with one of these is about the failure, not a success.
_FAILURE_WORDS = _words("failed fail fails unsuccessful error sorry unfortunately")

_STOP_WORDS = _words(
    "the a an to of for in on at by with from into and or another one some any their your its "
    "his her our my this that these those customer customers user users whether has have is are "
    "be enough new"
)
_PREPOSITIONS = _words("to for in on at by with from into of about")
_IRREGULAR = {
    "send": ("sent",),
    "pay": ("paid",),
    "buy": ("bought",),
    "make": ("made",),
    "take": ("took", "taken"),
    "give": ("gave", "given"),
    "put": ("put",),
    "set": ("set",),
    "get": ("got", "gotten"),
    "find": ("found",),
    "do": ("did", "done"),
    "run": ("ran",),
    "hold": ("held",),
    "lend": ("lent",),
    "spend": ("spent",),
    "sell": ("sold",),
    "keep": ("kept",),
    "tell": ("told",),
    "write": ("wrote", "written"),
    "withdraw": ("withdrew", "withdrawn"),
    "leave": ("left",),
    "bring": ("brought",),
    "build": ("built",),
}
_VOWELS = frozenset("aeiou")
_TOKEN = re.compile(r"[^\W_]+|[✅✔☑]")
_CONTRACTIONS = (
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'m\b"), " am"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'s\b"), " s"),
)
_SENTENCE = re.compile(r"[^.!?…\n]+[.!?…]*")
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]\"“”«»—–]|\s-\s")
_BE_CLAUSE = re.compile(
    r"^(?P<subject>[\w' ]+?) (?:is|are|was|were|has been|have been) (?:now |already )?"
    r"(?P<done>\w+)"
)


@dataclass(frozen=True)
class ActionWords:
    """The words of one action: every form of its verbs, the forms that say it is done, the
    nouns of its tool's name ("money" of transfer_money) and of its object and its steps'
    subjects ("the pizza order", "the transfer is complete"), singular and plural."""

    verbs: frozenset[str] = frozenset()
    done: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()  # the nouns of the tool's name
    nouns: frozenset[str] = frozenset()  # those and the others

    @property
    def all(self) -> frozenset[str]:
        """Words that name the action."""
        return self.verbs | self.nouns

    @property
    def signature(self) -> frozenset[str]:
        """Words that name this action and hardly another: its verbs and its name's nouns."""
        return self.verbs | self.named


def action_words(tool: str, description: str, step_texts: Iterable[str] = ()) -> ActionWords:
    """An action's words from its tool (name and description: "transfer_money", "Transfer money
    to another account") and what its steps tell the customer ("the transfer is complete")."""
    parts = [p for p in tool.casefold().split("_") if p]
    described = tokens(description)
    verbs = {w for w in (parts[:1] + described[:1]) if w.isalpha()}
    named = {p for p in parts[1:] if p not in _STOP_WORDS and p.isalpha()}
    nouns = set(named)
    for word in described[1:]:  # the object: the words after the verb, up to a preposition
        if word in _PREPOSITIONS:
            break
        if word not in _STOP_WORDS and word.isalpha():
            nouns.add(word)
    done = {f for v in verbs for f in _past_forms(v)}
    for text in step_texts:
        said = _BE_CLAUSE.match(" ".join(tokens(text)))
        if said is None or {"whether", "if"} & set(said["subject"].split()):
            continue
        nouns.update(w for w in said["subject"].split() if w not in _STOP_WORDS)
        done.add(said["done"])
    return ActionWords(
        verbs=frozenset(f for v in verbs for f in _verb_forms(v)),
        done=frozenset(done),
        named=frozenset(f for n in named for f in _noun_forms(n)),
        nouns=frozenset(f for n in nouns for f in _noun_forms(n)),
    )


@dataclass(frozen=True)
class Claim:
    """A clause that says an action was done, as written, and whether it names the action."""

    said: str
    specific: bool
    sentence: frozenset[str] = field(default_factory=frozenset)  # the words of its sentence


@dataclass(frozen=True)
class _Clause:
    said: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class _Sentence:
    clauses: tuple[_Clause, ...]
    question: bool

    @property
    def words(self) -> frozenset[str]:
        return frozenset(w for c in self.clauses for w in c.words)


class Reading:
    """A text read once into sentences and clauses, asked about any number of actions."""

    def __init__(self, text: str) -> None:
        self.sentences = tuple(_sentences(text))
        self.words = frozenset(w for s in self.sentences for w in s.words)

    def claims(self, action: ActionWords) -> list[Claim]:
        """Every unhedged clause (outside questions) that says `action` — or, barely,
        anything — was done."""
        found = []
        for sentence in self.sentences:
            if _is_question(sentence):
                continue
            for clause in sentence.clauses:
                if _claims(clause.words, action):
                    specific = bool(set(clause.words) & action.all)
                    found.append(Claim(clause.said, specific, sentence.words))
        return found

    def markers(self, markers: Sequence[str]) -> list[Claim]:
        """Sentences carrying one of `markers` (an action's success words, normalised) that do
        not deny, doubt or put off what they say, outside questions."""
        found = []
        for sentence in self.sentences:
            if _is_question(sentence):
                continue
            words = [w for c in sentence.clauses for w in c.words]
            hedges = _NEGATORS | _CONDITIONS | _MODALS | _FAILURE_WORDS
            if set(_without_interjections(words)) & hedges:
                continue
            said = f" {' '.join(words)} "
            for marker in markers:
                if marker and f" {marker} " in said:
                    found.append(Claim(marker, True, sentence.words))
        return found


def tokens(text: str) -> list[str]:
    """The words of a text, normalised: case folded, apostrophes straightened, contractions
    spelled out, decimal and thousands separators dropped ("$40.00" is one number)."""
    t = text.casefold().replace("’", "'").replace("‘", "'").replace("`", "'")
    for pattern, spelled in _CONTRACTIONS:
        t = pattern.sub(spelled, t)
    t = re.sub(r"(?<=\d)[.,](?=\d)", "", t)
    return _TOKEN.findall(t)


# -- reading --------------------------------------------------------------------------------------


def _sentences(text: str) -> list[_Sentence]:
    t = re.sub(r"(?<=\d)[.,](?=\d)", "", text.replace("’", "'"))
    sentences = []
    for m in _SENTENCE.finditer(t):
        raw = m.group(0)
        clauses = [
            _Clause(part.strip(), tuple(tokens(part)))
            for part in _CLAUSE_BREAK.split(raw.rstrip(".!?… "))
        ]
        clauses = [c for c in clauses if c.words]
        if clauses:
            sentences.append(_Sentence(tuple(clauses), raw.rstrip().endswith("?")))
    return sentences


def _is_question(sentence: _Sentence) -> bool:
    """ "Shall I transfer it, or is it done?" is a question; "The transfer is done, anything
    else?" says something before it asks."""
    if not sentence.question:
        return False
    return len(sentence.clauses) == 1 or sentence.clauses[0].words[0] in _QUESTION_OPENERS


def _claims(words: tuple[str, ...], action: ActionWords) -> bool:
    """Whether this clause says, unhedged, that something (or `action`) was done."""
    return any(not _hedged(words, start, end) for start, end in _claim_spans(words, action))


def _claim_spans(words: tuple[str, ...], action: ActionWords) -> list[tuple[int, int]]:
    spans = []
    for i, word in enumerate(words):
        if (
            word in _BARE_WORDS
            or word in action.done
            or (word in _PREDICATE_WORDS and (_after_be(words, i) or len(words) <= 2))
            or (word in _DONE_PARTICIPLES and _after_be(words, i))
        ):
            spans.append((i, i + 1))
        elif word.endswith("ing") and word in action.verbs and _after_be(words, i):
            spans.append((i, i + 1))  # "I'm transferring it now"
        for phrase in _BARE_PHRASES:
            if words[i : i + len(phrase)] == phrase:
                spans.append((i, i + len(phrase)))
    return spans


def _after_be(words: tuple[str, ...], i: int) -> bool:
    j = i - 1
    while j >= 0 and words[j] in _ADVERBS:
        j -= 1
    return j >= 0 and words[j] in _BE


def _hedged(words: tuple[str, ...], start: int, end: int) -> bool:
    """Whether the claim at words[start:end] is denied, doubted or put off by its clause."""
    if start > 0 and words[start - 1] in _RIGHT_BEFORE:
        return True  # "to complete", "will be transferred", "please complete"
    after = _without_interjections(words[end:])
    if after[:1] and after[0] in _RIGHT_AFTER and words[end] == after[0]:
        return True  # "I transferred nothing"
    before = list(words[:start])
    if set(before) & _CONDITIONS:
        return True  # a condition covers the rest of its clause
    scope = before
    for k in range(len(before) - 1, -1, -1):
        if before[k] in _SCOPE_ENDS:
            scope = before[k + 1 :]
            break
    return bool(set(_without_interjections(scope)) & (_NEGATORS | _MODALS))


def _without_interjections(words: Sequence[str]) -> list[str]:
    """The words with "no problem", "no worries", "never mind" … blanked (they deny nothing)."""
    kept = list(words)
    for i in range(len(kept)):
        for phrase in _NOT_NEGATIONS:
            if tuple(kept[i : i + len(phrase)]) == phrase:
                kept[i : i + len(phrase)] = [""] * len(phrase)
    return kept


# -- word forms -----------------------------------------------------------------------------------


def _verb_forms(verb: str) -> set[str]:
    forms = {verb, f"{verb}s", f"{verb}es", *_past_forms(verb)}
    if verb.endswith("e") and not verb.endswith("ee"):
        forms.add(f"{verb[:-1]}ing")
    else:
        forms.add(f"{verb}ing")
    if _doubles(verb):
        forms.add(f"{verb}{verb[-1]}ing")
    return forms


def _past_forms(verb: str) -> set[str]:
    """ "transfer" → transferred (and transfered), "place" → placed, "send" → sent."""
    if verb in _IRREGULAR:
        return set(_IRREGULAR[verb])
    if verb.endswith("e"):
        return {f"{verb}d"}
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in _VOWELS:
        return {f"{verb[:-1]}ied"}
    forms = {f"{verb}ed"}
    if _doubles(verb):
        forms.add(f"{verb}{verb[-1]}ed")
    return forms


def _doubles(verb: str) -> bool:
    """Ends consonant-vowel-consonant ("transfer", "submit", "cancel"): the last letter may be
    doubled before -ed / -ing (both spellings are accepted)."""
    return (
        len(verb) >= 3
        and verb[-1] not in _VOWELS | {"w", "x", "y"}
        and verb[-2] in _VOWELS
        and verb[-3] not in _VOWELS
    )


def _noun_forms(noun: str) -> set[str]:
    forms = {noun, f"{noun}s", f"{noun}es"}
    if noun.endswith("s") and len(noun) > 3:
        forms.add(noun[:-1])
    return forms
