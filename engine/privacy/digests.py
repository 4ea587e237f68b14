"""Keyed digests of secret values: how a session recognises a secret echoed in a later turn
without keeping it.

A turn masks the secret values it handled (`engine.privacy.secrets.TurnSecrets`) and then forgets them.
A model that read the password in that turn may still quote it in a later one ("your password
monkey is weak"). So the session keeps, for its lifetime, a digest of each secret value — never
the value — and every later turn digests the words of what it is about to store and masks a
match.

The threat is a leaked session store. A digest keyed only by what is stored next to it (the
session id, a salt) lets whoever holds the store test guesses offline, and a short password
falls to a dictionary in seconds. So each digest is a MAC under a per-session key,
`HMAC-SHA256(deployment key, salt)`: the deployment key reaches the engine through its
dependencies (`EngineDeps.secret_key`; in AWS an SSM SecureString, never in the session table);
the salt is random per session and stored with the digests, so the same password has unrelated
digests in two sessions. Without the deployment key the stored digests confirm nothing. An
engine given no key keeps no digest at all. (The MAC is keyed BLAKE2b, 128 bits: a keyed hash
designed as a MAC, and three times faster than HMAC on the many short runs a text is read as.)

Matching is deterministic and cheap: a text is read as its words (runs of letters and digits),
and each run of up to `MAX_WORDS` consecutive words, with what separates them, is digested in
the same normal form as the values were (NFKC, case folded, whitespace collapsed). It respects
`MIN_MASKED_CHARS`, like masking by value, and never looks inside a word ("monkeys" is not
"monkey").
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence

from engine.privacy.secrets import MIN_MASKED_CHARS

# Public: tests and local runs without a configured key use it (infra passes the real one).
DEVELOPMENT_KEY = b"waypoint development secret-digest key: public, never for a deployment"

KEPT_DIGESTS = 32  # per session, the most recent: a session item stays small
MAX_WORDS = 8  # a secret of more words is masked in its own turn only
MAX_CHARS = 128  # likewise for a longer one
_DIGEST_BYTES = 16  # 128 bits: no two values of a session collide
_DOMAIN = b"waypoint/secret-digests/v1\x00"

_WORD = re.compile(r"[^\W_]+")
_SPACES = re.compile(r"\s+")


def session_key(key: bytes, salt: str) -> bytes:
    """The key a session's digests are made with: HMAC-SHA256 of its salt under the
    deployment's key."""
    return hmac.digest(key, _DOMAIN + salt.encode(), "sha256")


def digest_of(key: bytes, value: str) -> str | None:
    """The digest a session keeps of a secret value (under its `session_key`), or None for a
    value later turns cannot recognise: shorter than `MIN_MASKED_CHARS` once its edge
    punctuation is dropped, or longer than `MAX_WORDS` words or `MAX_CHARS` characters."""
    words, forms, separators = _read(value)
    if not words or len(words) > MAX_WORDS:
        return None
    form = forms[0] + "".join(s + f for s, f in zip(separators, forms[1:], strict=True))
    if not MIN_MASKED_CHARS <= len(form) <= MAX_CHARS:
        return None
    return _digest(key, form)


def remembered(kept: Sequence[str], key: bytes, values: Iterable[str]) -> tuple[str, ...]:
    """`kept` with the digests of `values` added (each once), the `KEPT_DIGESTS` newest."""
    digests = list(kept)
    for value in values:
        digest = digest_of(key, value)
        if digest is not None and digest not in digests:
            digests.append(digest)
    return tuple(digests[-KEPT_DIGESTS:])


def echoes_in(key: bytes, digests: Collection[str], text: str) -> list[str]:
    """The places of `text` that are a remembered secret, as written there — with the
    punctuation that touches them up to the next space (it may be the value's own: "p@ss!").
    At each word the longest run that matches wins; the search goes on after it."""
    if not digests or not text:
        return []
    words, forms, separators = _read(text)
    found: list[str] = []
    i = 0
    while i < len(words):
        last = None
        form = ""
        for j in range(i, min(len(words), i + MAX_WORDS)):
            form = forms[j] if j == i else form + separators[j - 1] + forms[j]
            if len(form) > MAX_CHARS:
                break
            if len(form) >= MIN_MASKED_CHARS and _digest(key, form) in digests:
                last = j
        if last is None:
            i += 1
            continue
        start, end = _with_touching_punctuation(text, words[i].start(), words[last].end())
        found.append(text[start:end])
        i = last + 1
    return found


def _read(text: str) -> tuple[list[re.Match[str]], list[str], list[str]]:
    """A text's words, each in normal form, and the separators between them (whitespace runs
    as one space): how values and later texts are read alike."""
    words = list(_WORD.finditer(text))
    forms = [_normal(w.group()) for w in words]
    separators = [_separator(text[a.end() : b.start()]) for a, b in itertools.pairwise(words)]
    return words, forms, separators


def _with_touching_punctuation(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen `start:end` over the punctuation next to it, where a space (or the text's edge)
    ends that punctuation: "(monkey)," whole, but "monkey-foo" only as "monkey"."""
    left = start
    while left > 0 and not text[left - 1].isspace() and not text[left - 1].isalnum():
        left -= 1
    if left > 0 and not text[left - 1].isspace():
        left = start
    right = end
    while right < len(text) and not text[right].isspace() and not text[right].isalnum():
        right += 1
    if right < len(text) and not text[right].isspace():
        right = end
    return left, right


def _normal(piece: str) -> str:
    return unicodedata.normalize("NFKC", piece).casefold()


def _separator(piece: str) -> str:
    return _SPACES.sub(" ", _normal(piece))


def _digest(key: bytes, form: str) -> str:
    # Keyed BLAKE2b is a MAC like HMAC, and three times faster on the many short runs of words
    # a reply is read as.
    return hashlib.blake2b(form.encode(), key=key, digest_size=_DIGEST_BYTES).hexdigest()
