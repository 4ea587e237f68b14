"""A document that does not parse is told as the author needs it: the file, line and column, the
line itself with a caret under the spot, and the likely cause — never the parser's
`in "<unicode string>", line 27, column 13`."""

from __future__ import annotations

import pytest

from engine.authoring.document_text import parse_document_text
from engine.errors import InvalidAgentDefinition


def told(text: str, kind: str = "yaml", where: str = "agent.yaml") -> str:
    with pytest.raises(InvalidAgentDefinition) as caught:
        parse_document_text(text, kind, where)  # type: ignore[arg-type]
    (problem,) = caught.value.problems
    assert "<unicode string>" not in problem and "<block" not in problem
    return problem


def caret_column(problem: str) -> int:
    """The 1-based column the caret points at, in the quoted line's own columns."""
    caret = next(line for line in problem.splitlines() if line.rstrip().endswith("^"))
    return len(caret.split("| ", 1)[1])


SHOP = """\
agent: {id: shop, name: Shop}
guidelines:
  - id: greet
    condition: The customer greets
    action: Greet them
  - id: stock
   condition: The customer asks about stock
    action: Say how many are in stock
"""


def test_an_indentation_mistake_names_the_file_line_and_column_and_quotes_the_line() -> None:
    problem = told(SHOP)
    assert problem.startswith(
        "agent.yaml:7:4: not valid YAML: this line does not line up with the lines above it"
    )
    assert "   6 |   - id: stock" not in problem  # numbered to the width of the line number
    assert "  6 |   - id: stock" in problem and "  7 |    condition: The customer" in problem
    assert caret_column(problem) == 4
    assert (
        "hint: line 7 starts in column 4, line 6 above it in column 3 (its keys in column 5)"
        in (problem)
    )


def test_a_tab_is_named_as_the_cause_and_shown() -> None:
    problem = told("agent:\n\tid: shop\n")
    assert problem.startswith("agent.yaml:2:1: not valid YAML: a tab character")
    assert "  2 | →id: shop" in problem
    assert "replace the tab with spaces" in problem


def test_a_missing_colon_points_at_the_key_that_lacks_it() -> None:
    problem = told("agent:\n  id: shop\nguidelines\n  - id: greet\n")
    assert problem.startswith("agent.yaml:3:1: not valid YAML: a key without a colon")
    assert "`guidelines:`" in problem


def test_a_list_item_without_its_colon_is_found_though_the_parser_trips_a_line_later() -> None:
    problem = told("guidelines:\n  - id greet\n    condition: x\n")
    assert problem.startswith("agent.yaml:2:5: not valid YAML: a key without a colon")
    assert "`- id: greet`" in problem


def test_a_colon_inside_an_unquoted_value_suggests_the_quotes() -> None:
    problem = told("agent:\n  name: Shop: the best\n")
    assert problem.startswith("agent.yaml:2:13: not valid YAML: a colon inside a value")
    assert '`name: "Shop: the best"`' in problem


def test_a_line_indented_too_far_says_it_reads_as_the_value_above() -> None:
    problem = told("agent:\n  id: shop\n    name: Shop\n")
    assert problem.startswith("agent.yaml:3:5: not valid YAML: this line is indented more")
    assert "reads as part of line 2's value" in problem


def test_an_unclosed_bracket_points_at_where_it_opened() -> None:
    problem = told("agent: {id: shop\ntools: [a, b\n")
    assert problem.startswith("agent.yaml:1:8: not valid YAML: a `{` that is not closed")


def test_a_backslash_in_double_quotes_suggests_single_quotes() -> None:
    problem = told('pattern: "[A-Z]-\\d{4}"\n')
    assert "unknown escape" in problem and "single quotes" in problem


@pytest.mark.parametrize(
    ("text", "spot", "cause"),
    [
        ('{"agent": {"id": "shop",}}', "1:24", "a comma after the last item"),
        ('{"agent": {"id": "shop"}\n "tools": []}', "1:25", "a missing comma"),
        ("{'agent': {}}", "1:2", "a single quote"),
        ('{"agent": {"id": shop}}', "1:18", "a value is missing here, or is not JSON"),
        ('{"agent": {}}}', "1:14", "more text after the end of the document"),
    ],
)
def test_json_mistakes_are_placed_and_named(text: str, spot: str, cause: str) -> None:
    problem = told(text, "json", "agent.json")
    assert problem.startswith(f"agent.json:{spot}: not valid JSON: {cause}")
    assert caret_column(problem) == int(spot.split(":")[1])


def test_the_caret_stays_under_the_spot_after_wide_characters() -> None:
    problem = told("agent:\n  name: 商店\n   id: shop\n")  # the line above holds CJK text
    assert caret_column(problem) == 4
    problem = told("name: 商店: 好\n")
    # Two columns per CJK character on a terminal: the caret sits under the second colon.
    line = next(ln for ln in problem.splitlines() if "名" in ln or "商店" in ln)
    caret = next(ln for ln in problem.splitlines() if ln.rstrip().endswith("^"))
    assert caret.index("^") == line.index(":", line.index("商店")) + 2


def test_a_long_line_is_shown_around_the_spot() -> None:
    problem = told("agent:\n  description: " + "word " * 60 + "x: y\n")
    quoted = next(ln for ln in problem.splitlines() if ln.startswith("  2 | "))
    assert quoted.startswith("  2 | …") and len(quoted) < 120
    caret = next(ln for ln in problem.splitlines() if ln.rstrip().endswith("^"))
    assert quoted[caret.index("^")] == ":"
