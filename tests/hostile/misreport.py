"""`Misreport`: the honest offline model, except that in chosen turns it reports a chosen value
for a field — as a collected value of node selection and as a tool argument — whether or not the
honest answer had one. The adversary of the review's findings: a schema-valid model that picks
*another* value the customer did say (an earlier amount, a piece of an id, a decimal's tail)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from engine.matching.collected_values import CollectedItem
from engine.matching.journey_answer import JourneyNodeSelection
from engine.ports import Generation, Usage
from engine.tools.calls import ToolArgument, ToolCallPlan
from infra.offline import OfflineLLM
from infra.offline.journey_map import parse_journey_map

T = TypeVar("T", bound=BaseModel)


class Misreport:
    """`rewrites`: the text of a turn's message → {field: the value reported for it}."""

    def __init__(self, rewrites: dict[str, dict[str, str]]) -> None:
        self.rewrites = rewrites
        self.honest = OfflineLLM()
        self.prompts: list[str] = []
        self.turn_text = ""
        self.corrupted = 0

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.prompts.append(prompt)
        answer: BaseModel = (await self.honest.generate(prompt, schema, model=model)).value
        wanted = self.rewrites.get(self.turn_text, {})
        if wanted and isinstance(answer, JourneyNodeSelection):
            answer = self._selection(prompt, answer, wanted)
        elif wanted and isinstance(answer, ToolCallPlan):
            answer = self._plan(answer, wanted)
        value = schema.model_validate(answer.model_dump())
        return Generation(value, Usage(len(prompt) // 4, 20), "misreport", 0.0)

    def _selection(
        self, prompt: str, answer: JourneyNodeSelection, wanted: dict[str, str]
    ) -> JourneyNodeSelection:
        fields = {f.name for s in parse_journey_map(prompt).steps.values() for f in s.fields}
        items = [c for c in answer.collected if c.name not in wanted]
        items += [CollectedItem(name=n, value=v) for n, v in wanted.items() if n in fields]
        if items != answer.collected:
            self.corrupted += 1
        return answer.model_copy(update={"collected": items})

    def _plan(self, answer: ToolCallPlan, wanted: dict[str, str]) -> ToolCallPlan:
        calls = []
        for call in answer.calls:
            names = {a.name for a in call.arguments}
            arguments = [
                ToolArgument(name=a.name, value=wanted.get(a.name, a.value)) for a in call.arguments
            ]
            arguments += [
                ToolArgument(name=n, value=v) for n, v in wanted.items() if n not in names
            ]
            calls.append(call.model_copy(update={"arguments": arguments}))
            self.corrupted += 1
        return answer.model_copy(update={"calls": calls})


def transfers() -> list[str]:
    """The amounts the example bank moved, in order."""
    from examples.banking import bank

    return [t["amount"] for t in bank.BANK.transfers]


def moved(run: Any) -> list[dict[str, Any]]:
    """The transfer calls that ran, with their arguments as the tool got them."""
    return [r.call.arguments for t in run.turns for r in t.ran if r.call.tool == "transfer_money"]
