"""`waypoint validate` and an agent's languages: a served language needs every line the engine
writes (a shipped catalog, or the agent's own), an override names a real line with its values, and
what only falls back to another language is a warning that never fails validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.authoring import Agent, load_agent
from engine.errors import InvalidAgentDefinition
from engine.language.lines import keys, shipped
from engine.validation.agent import problems, warnings
from waypoint.cli import app


def agent(languages: list[str], messages: dict[str, Any] | None = None) -> Any:
    built = Agent("shop", "Shop", languages=languages, messages=messages)
    built.create_guideline("the customer greets", "greet back", id="hi")
    return built.build


def problems_of(languages: list[str], messages: dict[str, Any] | None = None) -> list[str]:
    with pytest.raises(InvalidAgentDefinition) as refused:
        agent(languages, messages)()
    return list(refused.value.problems)


def test_a_served_language_without_a_catalog_is_a_problem_naming_it_and_the_missing_lines() -> None:
    found = problems_of(["en", "it"], {"it": {"confirm_yes": "Sì, procedi", "confirm_no": "No"}})

    assert len(found) == 1
    assert found[0].startswith(
        "config.languages: Italian (italiano) (it) has no message catalog shipped with Waypoint; "
        "give every line the engine writes in it under messages.it — missing: fallback_reply, "
        "no_match, unsupported_media, confirmation, confirmation_retry, call_summary"
    )
    assert "confirm_yes" not in found[0] and "confirm_no" not in found[0]


def test_a_language_the_agent_writes_every_line_for_is_served_without_a_catalog() -> None:
    italian = {key: f"[it] {text}" for key, text in shipped("en").items()}

    built = agent(["en", "it"], {"it": italian})()

    assert problems(built) == []
    assert built.config.lines().line("confirm_yes", "it") == "[it] Yes, go ahead"


def test_the_default_languages_single_fields_count_as_its_lines() -> None:
    italian = {k: f"[it] {t}" for k, t in shipped("en").items() if k != "no_match"}
    built = Agent(
        "shop", "Shop", languages=["it"], messages={"it": italian},
        config={"no_match_response": "Non posso aiutarla qui."},
    )  # fmt: skip

    assert problems(built.build()) == []


def test_an_unknown_key_in_an_override_is_a_problem_naming_the_key() -> None:
    assert problems_of(["en", "es"], {"es": {"confirmaton": "¿Seguro?"}}) == [
        "messages.es: 'confirmaton' is not a line the engine writes; did you mean "
        "'confirmation'? (the keys are those of engine/language/catalogs/en.yaml)"
    ]


def test_an_override_with_a_value_the_line_does_not_have_is_a_problem() -> None:
    found = problems_of(["en", "es"], {"es": {"declined": "No hice «{{accion}}»."}})

    assert found == [
        "messages.es.declined: {{accion}} is not a value of this line; its values: {{action}}"
    ]


def test_a_confirmation_that_hides_the_values_or_asks_an_unknown_form_is_a_problem() -> None:
    found = problems_of(
        ["en"], {"en": {"confirmation": "OK?", "declined": "Fine, no {{action|upper}}."}}
    )

    assert found == [
        "messages.en.confirmation: the line must show {{summary}} (the customer sees exactly "
        "what they agree to)",
        "messages.en.declined: no value form 'upper'; the forms are lower_first, lower (as in "
        "{{action|lower_first}})",
    ]


def test_what_only_falls_back_or_is_never_sent_is_a_warning() -> None:
    built = agent(
        ["pt-PT", "en"], {"fr": {"no_match": "Pardon ?"}, "en": {"not_yet": "Not yet."}}
    )()

    assert problems(built) == []
    assert warnings(built) == [
        "config.languages: pt-PT has no catalog of its own; its lines are the pt-BR catalog's "
        "unless given under messages.pt-PT",
        "messages.fr: the agent does not serve French (français) (config.languages: pt-PT, en); "
        "these lines are never sent",
        "messages.en.not_yet: the line leaves out {{action}}",
    ]


def test_every_key_can_be_overridden() -> None:
    every = {key: shipped("de")[key] for key in keys()}
    assert problems(agent(["en"], {"en": every})()) == []


# -- the command line -----------------------------------------------------------------------------


def test_waypoint_validate_shows_warnings_and_accepts_the_agent(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        """
agent:
  id: shop
  name: Shop
  languages: [en, es]
guidelines:
  - {id: hi, condition: the customer greets, action: greet back}
canned_responses:
  - {id: hello, template: "Hello!"}
""",
        encoding="utf-8",
    )

    result = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "✓" in result.output and "1 warning" in result.output
    assert "canned response 'hello' has no variant for es" in result.output


def test_waypoint_validate_refuses_a_language_it_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "agent: {id: shop, name: Shop, languages: [en, ko]}\n"
        "guidelines: [{id: hi, condition: the customer greets, action: greet back}]\n",
        encoding="utf-8",
    )

    result = CliRunner().invoke(app, ["validate", str(path)], env={"COLUMNS": "400"})

    assert result.exit_code == 1
    assert "Korean (한국어) (ko) has no message catalog" in result.output
    assert "missing: fallback_reply" in result.output


def test_the_problems_are_reported_from_yaml_too() -> None:
    with pytest.raises(InvalidAgentDefinition) as refused:
        load_agent(
            {
                "agent": {"id": "shop", "name": "Shop", "messages": {"en": {"nope": "x"}}},
                "guidelines": [{"id": "hi", "condition": "c", "action": "a"}],
            }
        )
    assert any("'nope' is not a line the engine writes" in p for p in refused.value.problems)
