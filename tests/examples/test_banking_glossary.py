"""The banking example's glossary is what lets its customers say "wire funds", "move some cash"
or "a stock quote": the same conversations with the glossary removed do not start the journey.
Run on the real engine turn with the offline model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from infra.conversation_tests import Models, load_file, run_once
from infra.llm.factory import build_embedder, build_llm

BANKING = Path(__file__).resolve().parents[2] / "examples" / "banking" / "agent.yaml"
REQUESTS = [
    ("please wire funds to my landlord", "{authenticate: ask_username}"),
    ("I need to move some cash to another account", "{authenticate: ask_username}"),
    ("Can I send some money to a friend?", "{authenticate: ask_username}"),
    ("I'd like a stock quote", "{stock: ask_company}"),
]


def _passes(tmp_path: Path, agent: Path, text: str, step: str) -> bool:
    case = tmp_path / "case.yaml"
    case.write_text(
        f"agent: {agent}\ntools: examples.banking.tools\nsetup: examples.banking.bank:reset_bank\n"
        f'name: case\nturns:\n  - {{customer: "{text}", expect: {{journey_step: {step}}}}}\n',
        encoding="utf-8",
    )
    (test,) = load_file(case)
    models = Models(build_llm("offline"), build_embedder("offline"), real=False)
    return asyncio.run(run_once(test, models)).passed


@pytest.mark.parametrize(("text", "step"), REQUESTS)
def test_the_glossary_synonyms_start_the_journey(tmp_path: Path, text: str, step: str) -> None:
    assert _passes(tmp_path, BANKING, text, step)


@pytest.mark.parametrize(("text", "step"), REQUESTS)
def test_without_the_glossary_the_same_words_do_not(tmp_path: Path, text: str, step: str) -> None:
    definition = yaml.safe_load(BANKING.read_text(encoding="utf-8"))
    definition["terms"] = [t for t in definition["terms"] if t["name"] == "stock"]
    bare = tmp_path / "agent.yaml"
    bare.write_text(yaml.safe_dump(definition), encoding="utf-8")
    assert not _passes(tmp_path, bare, text, step)
