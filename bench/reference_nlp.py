"""The fake NLP service the reference engine runs on in `python -m bench compare`, through its
public `NLPService` interface: schematic generators, an embedder, no moderation.

Its generators follow the spec's script through the pure rules of `bench/reference_fake.py`
(guideline checks, response analysis, the journey's reachable-step conditions at boot and its
step selection, tool calls, the reply draft); a schema it has no rule for gets its minimal valid
instance. Every call is recorded in the `ReferenceRun`, with what the reference was told to do.

Loaded by `bench/reference_driver.py` inside the reference's own virtual environment: the
standard library, the reference's packages and the modules beside it only.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from parlant.core.common import DefaultBaseModel
from parlant.core.nlp.embedding import Embedder, EmbeddingResult
from parlant.core.nlp.generation import SchematicGenerationResult, SchematicGenerator
from parlant.core.nlp.generation_info import GenerationInfo, UsageInfo
from parlant.core.nlp.moderation import ModerationService, NoModeration
from parlant.core.nlp.service import NLPService
from parlant.core.nlp.tokenization import EstimatingTokenizer

if TYPE_CHECKING:  # mypy reads the modules beside this one as the bench package's
    from bench import reference_fake as fake
    from bench.reference_guideline_answers import (
        decided_conditions,
        guideline_check_answers,
        is_guideline_check,
    )
    from bench.reference_journey_answers import chosen_target, step_ids
    from bench.reference_run import ReferenceRun
    from bench.reference_script import TurnScript
else:  # the reference's venv: the driver's folder (bench/) is on sys.path
    import reference_fake as fake
    from reference_guideline_answers import (
        decided_conditions,
        guideline_check_answers,
        is_guideline_check,
    )
    from reference_journey_answers import chosen_target, step_ids
    from reference_script import TurnScript

# Fields a minimal instance would leave empty, and the engine needs to act like a model that
# answered: the preamble's and the draft's text (without it no message is sent).
OVERRIDES: dict[str, dict[str, Any]] = {
    "CannedResponsePreambleSchema": {"preamble": "One moment."},
    "CannedResponseDraftSchema": {"response_body": "Thanks for your message. How can I help?"},
}


_DUMPED = itertools.count()


def _dump(phase: str, schema: str, prompt: str, answer: str) -> None:
    """With REFERENCE_PROMPTS_DIR set, every prompt and the fake's answer, one file each (for
    reading what the reference asks while changing the fake)."""
    folder = os.environ.get("REFERENCE_PROMPTS_DIR")
    if folder:
        name = f"{next(_DUMPED):04d}-{phase}-{schema}.txt"
        Path(folder, name).write_text(f"{prompt}\n\n=== ANSWER ===\n{answer}\n", encoding="utf-8")


class CharTokenizer(EstimatingTokenizer):
    """chars/4: the unit both sides' prompt tokens are compared in."""

    async def estimate_token_count(self, prompt: str) -> int:
        return len(prompt) // 4


def _minimal(schema: dict[str, Any], defs: Mapping[str, Any]) -> Any:
    """The smallest instance a JSON schema accepts (objects get their required fields)."""
    if "$ref" in schema:
        return _minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        options = schema["anyOf"]
        nullable = [o for o in options if o.get("type") == "null"]
        return None if nullable else _minimal(options[0], defs)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _minimal(props[k], defs) for k in schema.get("required", [])}
    return {"array": [], "string": "fake", "boolean": False, "integer": 0, "number": 0.0}.get(
        str(kind)
    )


# FakeGenerator's own type parameter (the reference's `T`, re-declared): its genericity does not
# depend on the reference being installed where mypy runs (without it, its base is Any).
Schema = TypeVar("Schema", bound=DefaultBaseModel)


class FakeGenerator(SchematicGenerator[Schema], Generic[Schema]):
    """One schema's generator: the script's answer, else the schema's minimal instance; each
    call sleeps the run's latency and is recorded in it."""

    def __init__(self, schema: type[Any], run: ReferenceRun) -> None:
        self._schema = schema
        self._run = run

    @property
    def schema(self) -> type[Any]:
        return self._schema

    async def generate(
        self, prompt: Any, hints: Mapping[str, Any] | None = None
    ) -> SchematicGenerationResult[Any]:
        run = self._run
        text = prompt if isinstance(prompt, str) else prompt.build()
        started, cpu = time.perf_counter(), time.process_time()
        name = self._schema.__name__
        content = self._scripted(name, text)
        followed = content is not None
        if content is None:
            json_schema = self._schema.model_json_schema()
            data = _minimal(json_schema, json_schema.get("$defs", {}))
            data.update(OVERRIDES.get(name, {}))
            content = self._schema.model_validate(data)
        fake_cpu = (time.process_time() - cpu) * 1000
        _dump(run.current["phase"], self._schema.__name__, text, content.model_dump_json(indent=1))
        await asyncio.sleep(run.latency_s)
        run.calls.append(
            {
                "phase": run.current["phase"],
                "schema": self._schema.__name__,
                "prompt_chars": len(text),
                "start": started,
                "end": time.perf_counter(),
                "fake_cpu_ms": fake_cpu,
                "followed": followed,
            }
        )
        output = content.model_dump_json()
        return SchematicGenerationResult(
            content=content,
            info=GenerationInfo(
                schema_name=self._schema.__name__,
                model="fake",
                duration=run.latency_s,
                usage=UsageInfo(input_tokens=len(text) // 4, output_tokens=len(output) // 4),
            ),
        )

    def _scripted(self, name: str, text: str) -> Any:
        """The answer by the script's rules (reference_fake and beside it), validated; None if it
        has none."""
        run = self._run
        turn = run.current["turn"]
        if is_guideline_check(name):
            # Without a script for this turn, every condition is decided lexically.
            turn = turn or TurnScript.of({"message": run.current["message"]})
            for candidate in guideline_check_answers(text, turn, run.known):
                try:
                    content = self._schema.model_validate(candidate)
                except Exception:
                    continue
                if "GuidelineMatches" in name:
                    run.did_in_phase("guidelines").extend(decided_conditions(candidate))
                return content
            return None
        data = fake.answer(name, text, turn, run.known)
        if data is None:
            return None
        try:
            content = self._schema.model_validate(data)
        except Exception:
            return None
        if name == "ReachableNodesEvaluationSchema":
            run.step_ids.update(step_ids(text))
        if name == "JourneyNextStepSelectionSchema":
            run.did_in_phase("steps").append(chosen_target(text, data))
        return content

    @property
    def id(self) -> str:
        return "fake"

    @property
    def max_tokens(self) -> int:
        return 128_000

    @property
    def tokenizer(self) -> EstimatingTokenizer:
        return CharTokenizer()


class FakeEmbedder(Embedder):
    """Bag of words hashed into 256 dimensions (deterministic, instant)."""

    async def embed(
        self, texts: list[str], hints: Mapping[str, Any] | None = None
    ) -> EmbeddingResult:
        vectors = []
        for t in texts:
            v = [0.0] * 256
            for w in re.findall(r"[a-z]+", t.lower()):
                v[sum(map(ord, w)) % 256] += 1.0
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            vectors.append([x / norm for x in v])
        return EmbeddingResult(vectors=vectors)

    @property
    def id(self) -> str:
        return "fake-embedder"

    @property
    def max_tokens(self) -> int:
        return 8192

    @property
    def tokenizer(self) -> EstimatingTokenizer:
        return CharTokenizer()

    @property
    def dimensions(self) -> int:
        return 256


class FakeService(NLPService):
    """The service the server's `nlp_service` factory returns: one per run."""

    def __init__(self, run: ReferenceRun) -> None:
        self._run = run

    @property
    def supports_streaming(self) -> bool:
        return False

    async def get_schematic_generator(self, t: type[Any], hints: Any = None) -> Any:
        # Parametrized per schema: the server registers each generator under its own type.
        return FakeGenerator[t](t, self._run)  # type: ignore[valid-type]  # known at run time only

    async def get_streaming_text_generator(self, hints: Any = None) -> Any:
        raise NotImplementedError("the fake does not stream")

    async def get_embedder(self, hints: Any = None) -> Embedder:
        return FakeEmbedder()

    async def get_moderation_service(self) -> ModerationService:
        return NoModeration()
