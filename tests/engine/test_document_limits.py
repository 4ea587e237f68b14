"""Agent documents are read within limits (issue #14): a few hundred bytes of YAML aliases (the
"billion laughs") must be refused before anything expands them, from a file as from the API.

Every test runs with libyaml's parser (what PyYAML's wheels carry, and what reads documents when
it is there) and with PyYAML's pure-Python one (what reads them where libyaml is missing, and
what describes a document libyaml refused)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
import yaml

from engine.authoring import load_agent
from engine.authoring.document_text import (
    MAX_ALIASES,
    MAX_DOCUMENT_BYTES,
    MAX_EXPANDED_NODES,
    DocumentTooComplex,
    DocumentTooLarge,
    parse_document_text,
)
from engine.errors import InvalidAgentDefinition
from tests.engine.agents import BANK_CONCIERGE_YAML

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture(autouse=True, params=["libyaml", "pure-python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure-python":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    else:
        assert hasattr(yaml, "CSafeLoader"), "PyYAML without libyaml: reinstall its wheel"
    return str(request.param)


def billion_laughs() -> str:
    """An agent document whose nine levels of nine aliases stand for 9^9 = 387,420,489 strings."""
    lines = [
        "agent: {id: laughs, name: Laughs}",
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * 9)}]")
    lines.append("guidelines: [{condition: *i, action: laugh}]")
    return "\n".join(lines) + "\n"


def test_the_billion_laughs_is_refused_before_it_expands() -> None:
    bomb = billion_laughs()
    assert len(bomb.encode()) < 600  # the size of the document in the issue
    tracemalloc.start()
    try:
        with pytest.raises(DocumentTooComplex, match="alias-expansion limit") as caught:
            parse_document_text(bomb, "yaml", "body")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(MAX_EXPANDED_NODES) in caught.value.problems[0]
    assert peak < 20 * 1024 * 1024  # measured, not expanded


def test_the_file_loader_refuses_it_too(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(billion_laughs())
    with pytest.raises(DocumentTooComplex, match="alias-expansion limit") as caught:
        load_agent(path)
    assert str(path) in caught.value.problems[0]


def test_more_aliases_than_the_budget_are_refused_even_when_small() -> None:
    many = "x: &x 1\nys: [" + ",".join(["*x"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(DocumentTooComplex, match=f"more than {MAX_ALIASES} YAML aliases"):
        parse_document_text(many, "yaml", "body")
    few = "x: &x 1\nys: [" + ",".join(["*x"] * MAX_ALIASES) + "]\n"
    assert parse_document_text(few, "yaml", "body")["ys"] == [1] * MAX_ALIASES


def test_an_alias_to_its_own_container_is_refused() -> None:
    with pytest.raises(DocumentTooComplex, match="cycle"):
        parse_document_text("a: &a [*a]\n", "yaml", "body")


def test_a_document_over_the_byte_limit_is_refused_naming_the_limit() -> None:
    big = "agent: {id: big, name: " + "x" * MAX_DOCUMENT_BYTES + "}\n"
    with pytest.raises(DocumentTooLarge, match=f"{MAX_DOCUMENT_BYTES}-byte limit"):
        parse_document_text(big, "yaml", "body")


@pytest.mark.parametrize("kind", ["json", "yaml"])
def test_nesting_too_deep_to_read_is_refused_not_crashed(kind: str) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(DocumentTooComplex, match="nested too deeply"):
        parse_document_text(deep, kind, "body")  # type: ignore[arg-type]


def test_an_ordinary_agent_is_well_within_the_limits() -> None:
    assert load_agent(BANK_CONCIERGE_YAML).id
    with pytest.raises(InvalidAgentDefinition, match="not valid YAML"):
        parse_document_text("a: [unclosed", "yaml", "body")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/agent.yaml")), ids=lambda p: p.parent.name)
def test_both_parsers_read_every_example_alike(path: Path, parser: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert parse_document_text(text, "yaml", str(path)) == yaml.load(text, Loader=yaml.SafeLoader)
