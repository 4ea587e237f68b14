"""Yes and no, read in code: a confirmation, a retry offer or a yes/no field is answered only by
a clear yes or a clear no — anything else answers nothing."""

from __future__ import annotations

import re

from engine.values.reading import normalize

_YES = re.compile(
    r"(yes|yep|yeah|yup|sure|ok|okay|confirm|confirmed|i confirm|correct|go ahead|proceed|do it)"
    r"([ ,]+(please|go ahead|do it|proceed|that'?s (right|correct)|confirm(ed)?|thanks|thank you))*"
)
_NO = re.compile(r"(no|nope|cancel|stop|don'?t|do not|wait|hold on)\b.*")


def read_yes_no(text: str | None) -> bool | None:
    """True for a clear yes, False for a clear no, None for anything else."""
    folded = re.sub(r"[.!\s]+$", "", normalize(text or "").strip().casefold())
    folded = re.sub(r"\s+", " ", folded)
    if _YES.fullmatch(folded):
        return True
    if _NO.fullmatch(folded):
        return False
    return None
