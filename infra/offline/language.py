"""What a piece of text is about and what it signals, without a model.

Similarity = the cosine of `HashingEmbedder` vectors (lexical: words, stems, word pairs) combined
with concept overlap, where a few everyday English phrases become one concept ("sign in" → login,
"never mind" → cancel). A domain's words come from the agent, never from lists here: its
glossary's synonyms are read as their terms (`in_agent_words`). Signals are keyword patterns:
greeting, thanks, question, abandonment, yes / no. English only and deliberately conservative.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from infra.embeddings import HashingEmbedder

# Vectors here are computed on the fly and never stored, so they can be wide: fewer hash
# collisions between the few features of a short message ("1234" vs "money transfer").
_EMBEDDER = HashingEmbedder(dimensions=4096)


def word_set(text: str) -> frozenset[str]:
    """A set of words written as one whitespace-separated string (easier to read and edit)."""
    return frozenset(text.split())


# Phrases of everyday English, not of any domain, that become one concept word. Words of a
# domain (what "send" means at a bank) come from the agent's glossary: see `in_agent_words`.
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"\b(log|logging|logged|sign|signing|signed)\s+(in|on|into)\b", "login"),
    (r"\bnever ?mind\b", "cancel"),
    (r"\bforget (it|about it)\b", "cancel"),
    (r"\bcall off\b", "cancel"),
    # Asking a price: "how much is a massage?", "how much does it cost", "what does X cost"
    # Asking where a thing of one's own is asks how it is doing: "where is my order?"
    (r"\bwhere(?:'s| is| are)(?= (?:my|our|the) )", "status of"),
    # A span of time in its units asks how long: "how many days do I have" → how long
    (r"\bhow many (?:seconds|minutes|hours|days|weeks|months|years)\b", "how long"),
    # Asking how much one has asks for a balance: "how much do I have in savings?"
    (r"\bhow much (?:money )?(?:do|does|did) (?:i|we) (?:still )?have\b", "balance of what"),
    (r"\bhow much (a|an|the|one) (\w+) costs?\b", r"cost of \1 \2"),
    (r"\bhow much\b(?=[^.?!]*\bcost)", ""),
    (r"\bhow much (?:is|are|for) (?:a|an|the|one)\b", "cost of a"),
    (r"\bhow much (?:is|are) (?!(?:there|left|in|on|my|your|our)\b)", "cost of "),
)
_SYNONYMS: dict[str, str] = {
    # stopping
    "cancel": "cancel",
    "stop": "cancel",
    "abort": "cancel",
    "quit": "cancel",
    # people talk
    "hello": "greeting",
    "hi": "greeting",
    "hey": "greeting",
    # what something costs
    "price": "cost",
    "prices": "cost",
    "priced": "cost",
}
# Verbs that say little by themselves and take their meaning from their object: "get a pizza",
# "make an appointment", "set up a call" ask for the pizza, the appointment, the call.
_LIGHT_VERBS = word_set("get getting make making have take set arrange organise organize")
# Words that say nothing about the topic of a condition ("The customer wants to …").
_BOILERPLATE = word_set(
    """customer customers user users client clients agent wants want wanted would like likes asks
    ask asked asking request requests requested needs need tries try trying says say said
    mentions mention is are was were be know knows tell telling about interested inquires inquire
    enquires wishes wish looking intends please currently now already reports report reported
    states stated claims claimed indicates indicated explains explained informs something
    anything thing things stuff"""
)
_STOP = word_set(
    """a an the i im me my mine we our you your he she it its they them their this that these
    those to of in on at by for from with into over as and or but if then so than do does did
    have has had can could should will shall may might must just also some any what which who
    how when where why there here yes ok okay s t"""
)
_MONEY_AMOUNT = re.compile(
    r"[$€£¥]\s?\d|\d\s?(?:dollars?|euros?|pounds?|bucks|usd|eur|gbp)\b", re.I
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_TICKER = re.compile(r"\b[A-Z]{2,5}\b")
NOT_TICKERS = word_set(
    "I A OK ID USD EUR GBP PIN ATM FAQ US UK PM AM TV PC OTP SMS API URL NO YES HI CEO"
)


def stem(word: str) -> str:
    """The same tiny stemmer idea as the embedder: plurals and -ing / -ed endings."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def in_agent_words(text: str, glossary: Mapping[str, Sequence[str]]) -> str:
    """`text` with the agent's glossary synonyms replaced by their term ("wire some funds" →
    "transfer some funds" when the glossary says `transfer (also: wire)`), longest first."""
    pairs = sorted(
        ((synonym, term) for term, synonyms in glossary.items() for synonym in synonyms),
        key=lambda pair: -len(pair[0]),
    )
    for synonym, term in pairs:
        if synonym.strip():
            text = re.sub(rf"\b{re.escape(synonym)}\b", term, text, flags=re.I)
    return text


def canonical(text: str) -> str:
    """Lower-cased text with lexicon phrases replaced by their concept word."""
    lowered = text.lower()
    for pattern, concept in _PHRASES:
        lowered = re.sub(pattern, concept, lowered)
    return lowered


_CONTRACTION = re.compile(r"'(s|d|ll|m|re|ve)$")


def words(text: str) -> list[str]:
    """The words of `text`, lower-cased; a contraction's ending is dropped ("what's" → what,
    "i'd" → i) so that it never reads as a word of its own."""
    return [_CONTRACTION.sub("", w) for w in _WORD.findall(text.lower())]


def concepts(text: str, *, topic_only: bool = False) -> set[str]:
    """Content concepts of `text`: stemmed words through the phrase lexicon; an amount with a
    currency ("$500") is also the concept `money`. A new set each call (callers change it)."""
    return set(_concepts(text, topic_only))


@lru_cache(maxsize=8192)
def _concepts(text: str, topic_only: bool) -> frozenset[str]:
    # The same texts come back every turn (conditions, the agent's description and glossary):
    # about 2 % of the test suite's CPU went to reading them again.
    found: set[str] = set()
    for word in words(canonical(text)):
        if word in _STOP or (topic_only and word in _BOILERPLATE):
            continue
        found.add(_SYNONYMS.get(word, _SYNONYMS.get(stem(word), stem(word))))
    if _MONEY_AMOUNT.search(text):
        found.add("money")  # "$500" is money even when the word is not there
    return frozenset(found)


@lru_cache(maxsize=4096)
def _vector(text: str) -> npt.NDArray[np.float32]:
    return _EMBEDDER.embed_one(text)


def cosine(a: str, b: str) -> float:
    """Cosine of the hashing embeddings of the two texts after concept canonicalization; 0 when
    they share no word stem at all (what is left then is hash noise)."""
    ca, cb = concepts(a, topic_only=True), concepts(b, topic_only=True)
    if not ca or not cb or not _related(ca, cb):
        return 0.0
    va = _vector(" ".join(sorted(ca)))
    vb = _vector(" ".join(sorted(cb)))
    return max(0.0, float(np.dot(va, vb)))


def _related(a: set[str], b: set[str]) -> bool:
    """Some concept in common, or two words sharing their first four letters."""
    return bool(a & b) or bool(
        {w[:4] for w in a if len(w) >= 4} & {w[:4] for w in b if len(w) >= 4}
    )


def raw_cosine(a: str, b: str) -> float:
    """Cosine of the hashing embeddings of the texts as written."""
    if not a.strip() or not b.strip():
        return 0.0
    return max(0.0, float(np.dot(_vector(a), _vector(b))))


def coverage(topic: str, evidence: str) -> float:
    """The share of `topic`'s concepts (at most 3 counted) that `evidence` mentions."""
    wanted = concepts(topic, topic_only=True)
    if not wanted:
        return 0.0
    shared = wanted & concepts(evidence, topic_only=True)
    return min(1.0, len(shared) / min(len(wanted), 3))


HEAD_MATCH = 0.65  # a wish that names what the topic is about ("make a transfer" → transfer)
# A request, as opposed to a question about something ("the status of order 7"): only a request
# naming a topic's head concept is taken as that topic.
_WISH = re.compile(
    r"\b(want|wanna|would like|'d like|need|can i|could i|may i|can you|could you|would you|"
    r"please|help me|wish|let me|i'?ll have|i'?d love)\b",
    re.I,
)


def head_concept(topic: str) -> str | None:
    """The first content concept of a topic: what it is about ("The customer wants to transfer
    money" → transfer; "… the price of a stock" → price)."""
    for word in words(canonical(topic)):
        if word in _STOP or word in _BOILERPLATE:
            continue
        return _SYNONYMS.get(word, _SYNONYMS.get(stem(word), stem(word)))
    return None


def request_head(message: str) -> str | None:
    """What a request asks to do: the first content concept after its wish ("I'd like to return
    order A-1002" → return; "can I swap my coat" → swap), light verbs skipped ("make a booking"
    → booking). None when the message is not a request."""
    wish = _WISH.search(message)
    if wish is None:
        return None
    for word in words(canonical(message[wish.end() :])):
        if word in _STOP or word in _BOILERPLATE or word in _LIGHT_VERBS:
            continue
        return _SYNONYMS.get(word, _SYNONYMS.get(stem(word), stem(word)))
    return None


_ASKS = re.compile(r"\b(asks?|asking|inquires?|enquires?|wants? to know|wonders?)\b", re.I)


def object_concept(topic: str) -> str | None:
    """The last content concept of a topic: what its head acts on ("wants to book an
    appointment" → appointment). None when the topic has a single concept."""
    found = [
        _SYNONYMS.get(w, _SYNONYMS.get(stem(w), stem(w)))
        for w in words(canonical(topic))
        if w not in _STOP and w not in _BOILERPLATE
    ]
    return found[-1] if len(found) > 1 else None


def similarity(topic: str, evidence: str, *, by_head: bool = True) -> float:
    """0..1: how much `evidence` talks about `topic`: the larger of coverage and cosine, and at
    least `HEAD_MATCH` when the evidence names the topic's head concept in a request (or, for a
    topic about asking something, in a question), or asks for the topic's object with a light
    verb ("can I get a pizza" for "wants to order a pizza"). `by_head=False` when options that
    share a head are compared with each other."""
    score = max(0.9 * coverage(topic, evidence), cosine(topic, evidence))
    if not by_head:
        return score
    wish = bool(_WISH.search(evidence))
    asking = bool(_ASKS.search(topic)) and is_question(evidence)
    said = concepts(evidence, topic_only=True)
    head = head_concept(topic)
    if (wish or asking) and head is not None and head in said:
        score = max(score, HEAD_MATCH)
    thing = object_concept(topic)
    if wish and thing is not None and thing in said and _LIGHT_VERBS & set(words(evidence)):
        score = max(score, HEAD_MATCH)
    return score


# --------------------------------------------------------------------------------------------------
# Signals

_GREETING = word_set(
    """hi hello hey hiya howdy greetings morning afternoon evening good there yo"""
)
_THANKS = re.compile(r"\b(thanks|thank you|thx|cheers|appreciate it|that'?s all|bye|goodbye)\b")
_QUESTION_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|is|are|can|could|would|will|do|does|did|"
    r"should|may|shall)\b"
)


class _LaterOnTheLine:
    """Whether `first.*then` matches (`.` stops at a newline), read in linear time: the regex
    engine would scan `.*` again from every occurrence of `first`, quadratic on a long line that
    repeats it without `then`. An occurrence ending on a line already searched to its end adds
    nothing: `then` was not there."""

    def __init__(self, first: str, then: str) -> None:
        self.first = re.compile(first)
        self.then = re.compile(then)

    def search(self, text: str) -> bool:
        searched_line_end = -1
        position = 0
        while (found := self.first.search(text, position)) is not None:
            line_end = text.find("\n", found.end())
            line_end = len(text) if line_end < 0 else line_end
            if line_end != searched_line_end:
                if self.then.search(text, found.end(), line_end):
                    return True
                searched_line_end = line_end
            position = max(found.end(), found.start() + 1)
        return False


_ABANDON = (
    re.compile(r"\b(cancel|never ?mind|forget (it|about it)|abort|quit)\b"),
    re.compile(r"^(please\s+)?stop\b"),
    re.compile(r"\bno longer (want|need|interested)\b"),
    re.compile(r"\b(changed|change) my mind\b"),
    re.compile(r"\bnot interested\b"),
)
# "I don't want it anymore"
_WANTS_NO_MORE = _LaterOnTheLine(
    r"\b(don'?t|do not|no longer|not)\s+(want|need|wish|like)\b", r"\b(any ?more)\b"
)
_NEGATED_WISH = re.compile(r"\b(don'?t|do not|doesn'?t|no longer)\s+(want|need|wish)\b")
_YES = re.compile(
    r"^(yes|yeah|yep|yup|sure|ok|okay|correct|right|confirm(ed)?|affirmative|absolutely|"
    r"of course|please do|go ahead|do it|sounds good|that'?s right|that'?s correct|y|perfect|"
    r"great|fine|alright|all right|deal|definitely|certainly|exactly|let'?s do it|go for it|"
    r"(place|book|send|do) (it|that))\b"
)
_NO = re.compile(
    r"^(no|nope|nah|not really|negative|incorrect|wrong|n)\b|\b(don'?t|do not)\b|\bcancel\b"
)
_NEGATIVE_CONDITION = re.compile(
    r"\b(not|no|never|fail\w*|invalid|wrong|insufficient|declin\w*|den(y|ied|ies)|reject\w*|"
    r"refus\w*|cancel\w*|error|unable|cannot|can'?t|doesn'?t|don'?t|isn'?t|wasn'?t|won'?t|"
    r"gives? up|giving up|unsuccessful|too (much|high|low|little)|exceed\w*|lacks?|without)\b"
)
_FRUSTRATION = re.compile(
    r"\b(angry|frustrat\w*|upset|annoy\w*|terrible|awful|worst|ridiculous|useless|furious|"
    r"unacceptable|disappoint\w*)\b|!!"
)


def is_greeting(text: str) -> bool:
    """Only greeting words (and punctuation): "hi", "hello there", "good morning!"."""
    found = words(text)
    return bool(found) and all(w in _GREETING for w in found)


def is_thanks(text: str) -> bool:
    return bool(_THANKS.search(text.lower()))


_CLOSING = word_set(
    """thanks thank you thx cheers bye goodbye good day night see ya later ok okay great that's
    that all for now ta appreciate it much very so lot"""
)


def is_closing(text: str) -> bool:
    """Only thanks, goodbyes and greetings: "thanks, bye", "ok thank you", "hello"."""
    found = words(text)
    return bool(found) and (is_greeting(text) or all(w in _CLOSING for w in found))


def is_question(text: str) -> bool:
    stripped = text.strip().lower()
    return stripped.endswith("?") or bool(_QUESTION_START.match(stripped))


def is_abandonment(text: str) -> bool:
    """The customer drops what they were doing: "cancel", "never mind", "stop", "I don't want
    to … anymore"."""
    lowered = text.lower().strip()
    return any(p.search(lowered) for p in _ABANDON) or _WANTS_NO_MORE.search(lowered)


def negated_wish(text: str) -> bool:
    """A request turned down, whatever its topic: "I don't want …", "no longer need …"."""
    return bool(_NEGATED_WISH.search(text.lower()))


def is_frustrated(text: str) -> bool:
    return bool(_FRUSTRATION.search(text.lower()))


def answer_polarity(text: str) -> int:
    """+1 for a yes-like answer, -1 for a no-like one, 0 when it is neither."""
    lowered = text.lower().strip()
    if _YES.search(lowered) and not re.search(r"\b(not|don'?t|cancel)\b", lowered):
        return 1
    if _NO.search(lowered):
        return -1
    return 0


def condition_polarity(condition: str) -> int:
    """-1 when a condition describes a failure or refusal ("the login failed", "does not cover",
    "the customer cancelled"), else +1."""
    return -1 if _NEGATIVE_CONDITION.search(condition.lower()) else 1


_AGREEING = re.compile(
    r"\b(confirm\w*|agree\w*|accept\w*|approv\w*|says? (yes|ok)|is happy with|is fine with|"
    r"goes? ahead|wants? to proceed|proceed\w*)\b",
    re.I,
)
_CHANGING = re.compile(
    r"\b(chang\w*|different|another|instead|modif\w*|correct\w*|edit\w*|updat\w*|other|"
    r"new|adjust\w*|fix\w*)\b",
    re.I,
)


def asks_for_change(text: str) -> bool:
    """Whether `text` speaks of changing something: "change the amount", "a different account"."""
    return bool(_CHANGING.search(text))


def branch_polarity(condition: str) -> int:
    """Which way a customer's yes / no points for a branch condition: +1 for agreeing
    ("The customer confirmed the transfer"), -1 for declining, cancelling or changing something
    ("The customer wants to change the amount" — a "no" to the read-back is a wish to change)."""
    if condition_polarity(condition) < 0:
        return -1
    if _AGREEING.search(condition):
        return 1
    return -1 if _CHANGING.search(condition) else 1


_FAILURE_VALUE = re.compile(
    r"\b(fail\w*|denied|invalid|insufficient|declined|rejected|error|not found|wrong|locked|"
    r"expired|unauthori[sz]ed)\b"
)
_SUCCESS_VALUE = re.compile(r"\b(ok|success\w*|approved|done|complete\w*|valid|confirmed)\b")


def data_polarity(data: object) -> int:
    """+1 when tool data reads like success, -1 like failure, 0 when it says neither.

    Booleans decide first (any False → failure, a True → success); then words in string values
    ("denied", "insufficient" / "ok", "approved"); an `error` key is a failure."""
    if isinstance(data, dict):
        if data.get("error"):
            return -1
        values = list(data.values())
    elif isinstance(data, list):
        values = list(data)
    else:
        values = [data]
    booleans = [v for v in values if isinstance(v, bool)]
    if booleans:
        return 1 if all(booleans) else -1
    text = " ".join(str(v) for v in values if isinstance(v, str)).lower()
    if _FAILURE_VALUE.search(text):
        return -1
    if _SUCCESS_VALUE.search(text):
        return 1
    nested = [data_polarity(v) for v in values if isinstance(v, dict | list)]
    return -1 if -1 in nested else (1 if 1 in nested else 0)


def tickers(text: str) -> list[str]:
    """Upper-case, ticker-like symbols in order: "AAPL", "MSFT" (not "OK" or "ID")."""
    return [t for t in _TICKER.findall(text) if t not in NOT_TICKERS]
