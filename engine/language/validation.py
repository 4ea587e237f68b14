"""Load-time checks of an agent's languages: every served language has every line the engine
writes, overrides name real lines with their values, canned responses come in each language.

Part of `engine.validation.agent`. `language_problems` fail validation (a customer would get a line the
agent cannot write in their language, or a line missing its values); `language_warnings` do not
(`waypoint validate` shows them): a reply that falls back to the default language, an override
or a variant that is never sent.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.language.lines import FORMS, catalog_tag, keys, placeholders, shipped, unknown_forms
from engine.language.tags import language_name
from engine.model import AgentSnapshot, fields_of
from engine.validation.wording import did_you_mean

# Lines whose every value must be shown: an override that drops one hides what the customer
# agrees to (the exact call and its values), or loses items of a list.
_EVERY_VALUE = frozenset(
    {"confirmation", "confirmation_retry", "call_summary", "call_value", "list_and"}
)


def language_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """Served languages without all their lines, and overrides that are not lines or lack their
    values."""
    config = snapshot.config
    lines = config.lines()
    known = keys()
    for tag in config.languages:
        if catalog_tag(tag) is not None:
            continue
        missing = lines.missing(tag)
        if missing:
            yield (
                f"config.languages: {language_name(tag)} ({tag}) has no message catalog shipped "
                f"with Waypoint; give every line the engine writes in it under messages.{tag} — "
                f"missing: {', '.join(missing)}"
            )
    reference = shipped("en")
    for tag, own in config.messages.items():
        for key, text in own.items():
            where = f"messages.{tag}.{key}"
            if key not in reference:
                yield (
                    f"messages.{tag}: '{key}' is not a line the engine writes"
                    f"{did_you_mean(key, known)} (the keys are those of "
                    "engine/language/catalogs/en.yaml)"
                )
                continue
            expected = placeholders(reference[key])
            extra = sorted(placeholders(text) - expected)
            if extra:
                yield (
                    f"{where}: {_listed(extra)} {'is' if len(extra) == 1 else 'are'} not a value "
                    f"of this line; its values: {_listed(sorted(expected)) or 'none'}"
                )
            forms = unknown_forms(text)
            if forms:
                yield (
                    f"{where}: no value form {', '.join(repr(f) for f in forms)}; the forms are "
                    f"{', '.join(FORMS)} (as in {{{{action|lower_first}}}})"
                )
            dropped = sorted(expected - placeholders(text))
            if key in _EVERY_VALUE and dropped:
                yield (
                    f"{where}: the line must show {_listed(dropped)} (the customer sees exactly "
                    "what they agree to)"
                )


def language_warnings(snapshot: AgentSnapshot) -> Iterator[str]:
    """What a customer would read in another language than theirs, and what is never sent."""
    config = snapshot.config
    served = config.languages
    default = served[0]
    lines = config.lines()
    for tag in served:
        shipped_tag = catalog_tag(tag)
        own = lines.overrides.get(tag, {})
        if shipped_tag not in (None, tag) and any(k not in own for k in keys()):
            yield (
                f"config.languages: {tag} has no catalog of its own; its lines are the "
                f"{shipped_tag} catalog's unless given under messages.{tag}"
            )
    reference = shipped("en")
    for tag, own in config.messages.items():
        if tag not in served:
            yield (
                f"messages.{tag}: the agent does not serve {language_name(tag)} "
                f"(config.languages: {', '.join(served)}); these lines are never sent"
            )
        for key, text in own.items():
            if key in reference and key not in _EVERY_VALUE:
                dropped = sorted(placeholders(reference[key]) - placeholders(text))
                if dropped:
                    yield f"messages.{tag}.{key}: the line leaves out {_listed(dropped)}"
    for response in snapshot.canned_responses:
        owner = f"canned response '{response.id}'"
        lacking = [t for t in served[1:] if t not in response.variants]
        if lacking:
            yield (
                f"{owner} has no variant for {', '.join(lacking)}; a session in "
                f"{'that language' if len(lacking) == 1 else 'those languages'} gets its "
                f"template ({default}): add variants: {{{lacking[0]}: …}}"
            )
        for tag, text in response.variants.items():
            if tag == default:
                yield (
                    f"{owner}: its template is the {default} text (the default language); the "
                    f"variant for {tag} is never sent"
                )
            elif tag not in served:
                yield (
                    f"{owner}: the agent does not serve {tag} (config.languages: "
                    f"{', '.join(served)}); the variant for it is never sent"
                )
            unknown = sorted(set(fields_of(text)) - set(response.fields))
            if unknown:
                yield (
                    f"{owner}: the {tag} variant uses {_listed(unknown)}, which the template "
                    "does not; check the field names"
                )


def _listed(names: list[str]) -> str:
    return ", ".join(f"{{{{{n}}}}}" for n in names)
