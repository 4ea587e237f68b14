"""`engine.authoring` names its public API but loads each part on first use: reading a document's
text (`engine.authoring.document_text`, which the management API imports at start) does not load
the builders, the validation and the agent model."""

from __future__ import annotations

import importlib
import subprocess
import sys

import engine.authoring
from engine.authoring import _EXPORTS


def test_every_public_name_is_the_object_its_module_defines() -> None:
    assert sorted(engine.authoring.__all__) == sorted(_EXPORTS)
    for name, module in _EXPORTS.items():
        defined = getattr(importlib.import_module(f"engine.authoring.{module}"), name)
        assert getattr(engine.authoring, name) is defined, name
    from engine.authoring import Agent, load_agent  # the usual spelling still works

    assert Agent.__module__ == "engine.authoring.agent_builder"
    assert load_agent.__module__ == "engine.authoring.serialized"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        engine.authoring.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("an unknown name was found")


def test_reading_a_document_text_loads_no_builder_and_no_agent_model() -> None:
    code = (
        "import sys, engine.authoring.document_text\n"
        "print(sorted(m for m in ('engine.authoring.agent_builder', 'engine.model', "
        "'engine.validation.agent', 'pydantic') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"
