"""`engine.testing.ScriptedLLM`, the fake model tests script: a schema not scripted fails the
test, unless the test says what to answer otherwise."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine.testing import ScriptedLLM


class Answer(BaseModel):
    text: str


async def test_a_schema_nobody_scripted_fails_the_test() -> None:
    with pytest.raises(AssertionError, match="unexpected call for schema Answer"):
        await ScriptedLLM().generate("p", Answer, model="m")


async def test_otherwise_answers_only_what_the_test_did_not_script() -> None:
    llm = ScriptedLLM().otherwise(Answer, {"text": "default"})
    assert (await llm.generate("p", Answer, model="m")).value.text == "default"

    llm.on(Answer, {"text": "first"}, lambda prompt: {"text": prompt})

    assert (await llm.generate("p", Answer, model="m")).value.text == "first"
    assert (await llm.generate("q", Answer, model="m")).value.text == "q"
