"""Pulling typed values out of a customer's words: what a step collects, what a tool needs.

Each value fills a `Slot` (`infra.offline.slots`: a journey field or a tool parameter, with the
role its type and name give it). Values are taken, in this order:

1. after a cue naming the slot ("account ID 1234324", "my password is monkey", "order #17");
2. by shape, when the role makes it safe (a currency amount, a ticker, an enum option, a date —
   `infra.offline.shapes`, `infra.offline.choices`);
3. as a direct answer — only for slots the agent has just asked for ("seldo" after "what is your
   username?"), never from a message that is a question or drops the conversation.

Nothing is ever made up: a slot with no evidence is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from infra.offline.choices import (
    direct_answer,
    mentions_choice,
    offered_options,
    offered_order,
    ordinal_pick,
)
from infra.offline.language import (
    NOT_TICKERS,
    answer_polarity,
    is_abandonment,
    is_closing,
    is_question,
    tickers,
    word_set,
)
from infra.offline.shapes import (
    EMAIL,
    MONTHS,
    PHONE,
    WrittenNumber,
    clock_times,
    iso_dates,
    tokenize,
    weekdays,
    written_numbers,
)
from infra.offline.slots import AWAY_WORDS, BOOL, DATE, ENUM, INT, TEXT, TOWARD_WORDS, Slot

_CONNECTORS = word_set(
    "is are was be will should it's its : = # of for called named the my our a an"
)
_NAMING_CONNECTORS = word_set("is are was : = called named")
_NOT_VALUES = word_set(
    """please thanks thank you ok okay yes no sure the a an my our your it this that is are and
    or but to for of in on at with now again here there what which how why when where please
    help want need like would could can do does i me we hi hello hey"""
)
_MONEY_VERBS = word_set(
    "transfer transferring send sending pay paying move moving wire withdraw deposit"
)


def extract_values(
    slots: Sequence[Slot],
    text: str,
    *,
    answering: Iterable[str] = (),
    named_only: bool = False,
    offered: str = "",
) -> dict[str, str]:
    """Values for `slots` found in `text`, as text the engine coerces (digits for numbers, the
    canonical option for enums, "yes"/"no", ISO dates). `answering` names the slots the agent has
    just asked for, in the order it asked: only those may take a bare answer ("seldo").
    `named_only` keeps just the values a cue names ("account ID 1234324", "amount of $500"), for
    text that was not written with these slots in mind. `offered` is the agent's last message:
    "the second" / "the first one" pick from the options it listed."""
    return _Extraction(slots, text, tuple(answering), named_only, offered).run()


class _Extraction:
    def __init__(
        self,
        slots: Sequence[Slot],
        text: str,
        answering: tuple[str, ...],
        named_only: bool,
        offered: str = "",
    ) -> None:
        self.named_only = named_only
        self.offered = offered
        self.slots = list(slots)
        self.text = text
        self.tokens = tokenize(text)
        self.replying = (
            bool(answering)
            and not named_only
            and not is_question(text)
            and not is_abandonment(text)
        )
        self.answering = [a for a in answering if any(s.name == a for s in slots)]
        self.values: dict[str, str] = {}
        self.claimed: set[int] = set()

    def run(self) -> dict[str, str]:
        if not self.text.strip():
            return {}
        if not self.named_only:
            self._patterns()
        self._shaped_words()
        self._cued()
        self._numbers()
        if not self.named_only:
            self._shapes()
        if self.replying:
            self._bare_answers()
        elif not self.named_only and not self.answering:
            self._proper_name()
        return self.values

    def _proper_name(self) -> None:
        """A name said on the customer's own, with the request ("What is Apple's stock price?",
        "how are Amazon shares doing"): the one capitalised word that does not start a sentence
        fills the one open name field. Two candidates, or two name fields: which is which is
        unclear, so neither is taken."""
        names = self._open("name")
        if len(names) != 1:
            return
        found = []
        for token in self.tokens[1:]:
            before = self.tokens[token.index - 1].raw
            word = re.sub(r"'s$", "", token.clean)
            if (
                token.index in self.claimed
                or before.endswith((".", "!", "?"))
                or not word[:1].isupper()
                or not word.isalpha()
                or word.upper() in NOT_TICKERS
                or word.lower() in _NOT_VALUES
            ):
                continue
            found.append((word, token.index))
        if len(found) == 1:
            self._claim(names[0], found[0][0], found[0][1])

    def _open(self, role: str | None = None) -> list[Slot]:
        return [
            s for s in self.slots if s.name not in self.values and (role is None or s.role == role)
        ]

    def _is_answering(self, slot: Slot) -> bool:
        return self.replying and slot.name in self.answering

    def _claim(self, slot: Slot, value: str, *indexes: int) -> None:
        self.values[slot.name] = value
        self.claimed.update(indexes)

    # -- whole-message patterns: emails, phones, dates --------------------------------------------

    def _patterns(self) -> None:
        for slot in self._open("email"):
            found = EMAIL.search(self.text)
            if found:
                self._claim(slot, found.group(0), *self._indexes_of(found.group(0)))
        for slot in self._open("phone"):
            found = PHONE.search(self.text)
            if found and (self._is_answering(slot) or self._cue_before(slot, found.group(0))):
                self._claim(slot, re.sub(r"[\s().-]", "", found.group(0)))
                self.claimed.update(self._indexes_of(found.group(0)))
        dates = iso_dates(self.text)
        if dates:  # a date's numbers are not amounts or ids
            for token in self.tokens:
                if re.search(r"\d{4}", token.clean) or token.lower in MONTHS:
                    self.claimed.add(token.index)
        for slot, day in zip(self._open(DATE), dates, strict=False):
            self._claim(slot, day)

    def _shaped_words(self) -> None:
        """A text value the agent gave a pattern, by its shape: "where is my parcel A-1001" for
        an order id shaped /[A-Za-z]-\\d{4}/. Taken when exactly one word has the shape; in text
        not written for these slots (`named_only`) only a word that cannot be a bare number or a
        plain word (a digit and a letter or a sign: "A-1001", "QX7K2P", never "1234")."""
        for slot in self._open(None):
            shape = slot.shape
            if shape is None or slot.kind != TEXT:
                continue
            found = {m.group(0) for m in shape.finditer(self.text)}
            if len(found) != 1:
                continue
            value = found.pop()
            indexes = self._indexes_of(value)
            if set(indexes) & self.claimed:
                continue
            if self.named_only and not _unmistakable(value):
                continue
            self._claim(slot, value, *indexes)

    def _indexes_of(self, fragment: str) -> list[int]:
        return [t.index for t in self.tokens if t.clean and t.clean in fragment]

    def _choice_indexes(self, choice: str) -> list[int]:
        words = set(choice.lower().replace("_", " ").split())
        return [
            t.index
            for t in self.tokens
            if t.lower in words or (t.lower.endswith("s") and t.lower[:-1] in words)
        ]

    def _cue_before(self, slot: Slot, fragment: str) -> bool:
        before = self.text[: self.text.find(fragment)].lower()
        return any(re.search(rf"\b{re.escape(c)}\b", before) for c in slot.cues)

    # -- after a cue naming the slot ---------------------------------------------------------------

    def _cued(self) -> None:
        for slot in self._open():
            if slot.role in ("money", "count", BOOL, ENUM, DATE, "email", "phone"):
                continue
            found = self._after_cue(slot)
            if found is not None:
                value, indexes = found
                self._claim(slot, value, *indexes)

    def _after_cue(self, slot: Slot) -> tuple[str, list[int]] | None:
        """The token after a word naming the slot ("account ID 1234324", "password is monkey",
        "order #17"), connectors skipped; else a name written before its head noun."""
        short = len(self.tokens) <= 4
        for i, token in enumerate(self.tokens):
            inline = token.raw.startswith("#") and len(token.clean) > 1 and "#" in slot.cues
            if token.lower not in slot.cues and not inline:
                continue
            j, named = self._skip_connectors(slot, i if inline else i + 1)
            if j >= len(self.tokens) or j in self.claimed or self._wrong_way(slot, i, j):
                continue
            value = self.tokens[j].clean.lstrip("#")
            if slot.role == "id":
                if re.search(r"\d", value):
                    return value, [j]
                continue
            if not value or value.lower() in _NOT_VALUES:
                continue
            if slot.role == "symbol":
                return _ticker_for(value), [j]
            if not (named or short or self._is_answering(slot)):
                continue  # "my account balance" does not name an account "balance"
            if slot.role == "name" and named:
                return self._name_phrase(j)
            return value, [j]
        return self._before_head_noun(slot)

    def _skip_connectors(self, slot: Slot, j: int) -> tuple[int, bool]:
        """The first token from `j` that is not a connector ("is", ":", "the") or another cue,
        and whether a naming connector ("is", "called") was passed."""
        named = False
        for _ in range(4):
            if j >= len(self.tokens):
                break
            word = self.tokens[j].lower
            if word not in _CONNECTORS and word not in slot.cues:
                break
            named = named or word in _NAMING_CONNECTORS
            j += 1
        return j, named

    def _wrong_way(self, slot: Slot, cue: int, value: int) -> bool:
        """Whether the nearest direction word before the value points the other way: "To
        account 123" does not name a `from_account_id`."""
        if not slot.direction:
            return False
        for token in reversed(self.tokens[max(0, cue - 3) : value]):
            if token.lower in TOWARD_WORDS:
                return slot.direction < 0
            if token.lower in AWAY_WORDS:
                return slot.direction > 0
        return False

    def _name_phrase(self, start: int) -> tuple[str, list[int]]:
        """A name given after "is": up to four words, stopping at a conjunction or comma."""
        taken = [start]
        for k in range(start + 1, min(start + 4, len(self.tokens))):
            if self.tokens[k].lower in {"and", "but", "please", "thanks"} or k in self.claimed:
                break
            if self.tokens[k - 1].raw.endswith((",", ".", ";")):
                break
            taken.append(k)
        return " ".join(self.tokens[k].clean for k in taken), taken

    def _before_head_noun(self, slot: Slot) -> tuple[str, list[int]] | None:
        """A name before its head noun: "my Checking account" → `account_name` "Checking"."""
        if slot.role != "name":
            return None
        heads = [w for w in slot.name_words if w not in {"name", "the", "of"}]
        if not heads:
            return None
        head = heads[-1]
        for i, token in enumerate(self.tokens[1:], start=1):
            if token.lower != head or i - 1 in self.claimed:
                continue
            before = self.tokens[i - 1]
            determiner = self.tokens[i - 2].lower if i >= 2 else ""
            if before.lower in _NOT_VALUES or before.lower in _CONNECTORS:
                continue
            if determiner in {"my", "the", "our", "your", "from", "to"} or before.raw[:1].isupper():
                return before.clean, [i - 1]
        return None

    # -- numbers -----------------------------------------------------------------------------------

    def _numbers(self) -> None:
        candidates = [n for n in written_numbers(self.tokens, self.claimed)]
        wanting = [s for s in self._open() if s.role in ("money", "count", "id")]
        pairs = []
        for order, slot in enumerate(wanting):
            for number in candidates:
                # named only: a cue word, or a currency for an amount ("200 dollars")
                named = self._cued_number(slot, number) or (
                    slot.role == "money" and bool(number.currency)
                )
                if self.named_only and not named:
                    continue
                score = self._affinity(slot, number)
                threshold = 0 if self._is_answering(slot) else 1
                if score >= threshold:
                    pairs.append((score, -order, slot, number))
        pairs.sort(key=lambda p: (p[0], p[1]), reverse=True)
        for _score, _order, slot, number in pairs:
            if slot.name in self.values or number.token.index in self.claimed:
                continue
            if slot.kind == INT and number.fraction:
                continue
            if number.word and slot.role != "count":
                continue
            value = number.value if slot.role != "id" else number.token.clean.lstrip("#")
            self._claim(slot, value, number.token.index)

    def _cued_number(self, slot: Slot, number: WrittenNumber) -> bool:
        i = number.token.index
        before = {t.lower for t in self.tokens[max(0, i - 3) : i]}
        after = self.tokens[i + 1].lower if i + 1 < len(self.tokens) else ""
        return bool(slot.cues & before) or after in slot.cues

    def _affinity(self, slot: Slot, number: WrittenNumber) -> int:
        i = number.token.index
        before = [t.lower for t in self.tokens[max(0, i - 3) : i]]
        cued = self._cued_number(slot, number)
        answering = 1 if self._is_answering(slot) else 0
        idish = {"to", "#", "account", "acct", "id", "number", "no"}
        if slot.role == "money":
            score = 1 + answering + (3 if number.currency else 0) + (2 if cued else 0)
            score += 1 if _MONEY_VERBS & set(before) else 0
            if before and before[-1] in idish and not number.currency:
                score -= 3
            if number.digits >= 7 and not number.currency:
                score -= 2
            return score
        if slot.role == "count":
            return answering + (3 if cued else 0) + (-2 if number.currency else 1)
        # an id given as a bare number
        if self._wrong_way(slot, i, i):
            return -10
        score = answering + (3 if cued else 0)
        score += 2 if before and before[-1] in idish else 0
        score += 1 if number.digits >= 5 else 0
        score -= 4 if number.currency else 0
        score -= 2 if number.fraction else 0
        return score

    # -- by shape ----------------------------------------------------------------------------

    def _shapes(self) -> None:
        for slot in self._open(ENUM):
            mentioned = [c for c in slot.choices if mentions_choice(self.text, c)]
            if not mentioned:  # the agent's own words for a choice (glossary, description)
                named = [c for phrase, c in slot.aliases if mentions_choice(self.text, phrase)]
                mentioned = list(dict.fromkeys(named))
            if len(mentioned) == 1:
                # The choice's words are spoken for: a bare text answer in the same message
                # ("large with mushrooms") is what remains, not the whole message.
                self._claim(slot, mentioned[0], *self._choice_indexes(mentioned[0]))
            elif not mentioned and self._is_answering(slot):
                picked = ordinal_pick(self.text, offered_order(slot.choices, self.offered))
                if picked is not None:
                    self._claim(slot, picked, *range(len(self.tokens)))
        for slot in self._open(BOOL):
            cued = any(re.search(rf"\b{re.escape(c)}\b", self.text.lower()) for c in slot.cues)
            polarity = answer_polarity(self.text)
            if polarity and (self._is_answering(slot) or cued):
                self._claim(slot, "yes" if polarity > 0 else "no")
        for slot in self._open("symbol"):
            found = tickers(self.text)
            if found:
                self._claim(slot, found[0], *self._indexes_of(found[0]))
        for slot in self._open("time"):
            times = clock_times(self.text)
            if len(times) == 1:  # "11:30 works for me" → 11:30; two times: which one is unclear
                value, said = times[0]
                self._claim(slot, value, *self._indexes_of(said))
        for slot in self._open("weekday"):
            days = weekdays(self.text)
            if len(days) == 1:
                self._claim(slot, days[0], *self._indexes_of(days[0]))

    # -- bare answers to what the agent just asked -----------------------------------------------

    def _bare_answers(self) -> None:
        open_slots = [
            s
            for s in (next(x for x in self.slots if x.name == a) for a in self.answering)
            if s.name not in self.values and s.kind == TEXT
        ]
        if not open_slots:
            return
        answer = direct_answer(" ".join(t.raw for t in self.tokens if t.index not in self.claimed))
        if not answer or is_closing(answer) or _only_courtesy(answer):
            return  # "thanks, bye" or a bare "yes" answers no question for a text
        options = offered_options(self.offered)
        picked = ordinal_pick(answer, options) if options else None
        if picked is not None:
            self.values[open_slots[0].name] = picked
            return
        parts = [p for p in re.split(r"\s*(?:,|/|\band\b|\s)\s*", answer) if p]
        if len(open_slots) > 1 and len(parts) == len(open_slots):
            for slot, part in zip(open_slots, parts, strict=True):
                self.values[slot.name] = _shaped(slot, part)
            return
        slot = open_slots[0]
        if slot.role == "id":
            digits = [p for p in parts if re.search(r"\d", p)]
            if digits:
                self.values[slot.name] = digits[0].lstrip("#")
            return
        if slot.role in ("token", "secret", "symbol"):
            if 1 <= len(parts) <= 2:  # "/" alone splits into nothing: no value
                self.values[slot.name] = _shaped(slot, parts[0])
            return
        if len(parts) <= 5:
            self.values[slot.name] = answer


def _unmistakable(value: str) -> bool:
    """A word no one would say for anything but a code: digits with letters or signs."""
    return any(c.isdigit() for c in value) and not value.isdigit()


def _only_courtesy(answer: str) -> bool:
    """Only yes / no / okay / please and the like: no value for a text field."""
    said = re.findall(r"[a-z']+|\d+", answer.lower())
    return bool(said) and all(w in _NOT_VALUES for w in said)


def _shaped(slot: Slot, value: str) -> str:
    if slot.role == "symbol":
        return _ticker_for(value)
    if slot.role == "id":
        return value.lstrip("#")
    return value


def _ticker_for(value: str) -> str:
    """A symbol as written, upper-cased: which company a name means is the agent's knowledge
    (an enum with aliases in its description, or a lookup tool), never a table of ours."""
    return value.upper()
