"""State machine definitions (Amazon States Language files under `statemachine/`).

The ASL files are templates: `${Name}` placeholders are filled from the SAM template's
`DefinitionSubstitutions` in the cloud, and by `render_definition` locally — the same text
replacement, so the file moto runs is the file AWS runs. A placeholder may stand unquoted for a
number (`"TimeoutSeconds": ${ToolTimeoutSeconds}`), so a file is JSON only after substitution.

Neither moto's ASL parser nor cfn-lint notices a `Next` that names a missing state;
`check_references` does.

    definition = render_definition(TOOLS_ASL, {"ToolFunctionArn": arn, "ToolTimeoutSeconds": 15})
    check_references(json.loads(definition))
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.errors import WaypointError
from infra.aws.stack_files import stack_file

TOOLS_ASL = stack_file("statemachine/tools.asl.json")  # the checkout's, or the wheel's copy
STATEMACHINE_DIR = TOOLS_ASL.parent

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.:-]+)\}")
# States that must say where to go next (or end the execution).
_NEEDS_TRANSITION = {"Task", "Pass", "Wait", "Map", "Parallel"}

Substitution = str | int | float | bool


class InvalidStateMachineDefinition(WaypointError):
    """An ASL definition cannot be used as is. `problems` lists every issue found, each with the
    path of the offending field, so one run shows all of them."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        bullet = "\n  - ".join(self.problems)
        super().__init__(
            f"invalid state machine definition ({len(self.problems)} problem(s)):\n  - {bullet}"
        )


def substitute(text: str, substitutions: Mapping[str, Substitution]) -> str:
    """Replace every `${Name}` with its value, as DefinitionSubstitutions does.

    Strings are inserted verbatim (the file quotes them), numbers as JSON numbers, booleans as
    `true`/`false`. A placeholder without a value is an error: AWS would deploy the literal
    `${Name}` and fail at run time instead.
    """
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(text)} - set(substitutions))
    if missing:
        raise InvalidStateMachineDefinition(
            [f"no substitution for ${{{name}}}; pass it in substitutions" for name in missing]
        )

    def value(match: re.Match[str]) -> str:
        v = substitutions[match.group(1)]
        return json.dumps(v) if isinstance(v, bool) else str(v)

    return _PLACEHOLDER.sub(value, text)


def render_definition(path: str | Path, substitutions: Mapping[str, Substitution]) -> str:
    """The ASL file at `path` with its placeholders filled: a JSON string for CreateStateMachine.

    Raises `InvalidStateMachineDefinition` when a placeholder has no value, the result is not
    JSON, or a state reference dangles.
    """
    text = substitute(Path(path).read_text(encoding="utf-8"), substitutions)
    try:
        definition = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidStateMachineDefinition(
            [f"{path}: not JSON after substitution: {exc}"]
        ) from exc
    check_references(definition)
    return text


def load_definition(path: str | Path, substitutions: Mapping[str, Substitution]) -> dict[str, Any]:
    """Like `render_definition`, parsed."""
    definition: dict[str, Any] = json.loads(render_definition(path, substitutions))
    return definition


def check_references(definition: Mapping[str, Any]) -> None:
    """Verify that every `StartAt`, `Next`, `Default` and Choice-rule / Catch `Next` names a state
    of its own scope (the top level, a Map's `ItemProcessor`/`Iterator`, a Parallel branch), and
    that every Task/Pass/Wait/Map/Parallel state has a `Next` or `End`.

    Raises `InvalidStateMachineDefinition` listing every problem.
    """
    problems = list(_scope_problems(definition, "$"))
    if problems:
        raise InvalidStateMachineDefinition(problems)


def _scope_problems(scope: Mapping[str, Any], where: str) -> Iterator[str]:
    states = scope.get("States")
    if not isinstance(states, Mapping) or not states:
        yield f"{where}.States: missing or empty"
        return
    known = set(states)

    def target(name: Any, field: str) -> Iterator[str]:
        if name not in known:
            yield f"{field} → {name!r} is not a state here (states: {', '.join(sorted(known))})"

    yield from target(scope.get("StartAt"), f"{where}.StartAt")
    for state_name, state in states.items():
        at = f"{where}.States.{state_name}"
        if not isinstance(state, Mapping):
            yield f"{at}: not an object"
            continue
        if "Next" in state:
            yield from target(state["Next"], f"{at}.Next")
        elif state.get("Type") in _NEEDS_TRANSITION and state.get("End") is not True:
            yield f'{at}: a {state["Type"]} state needs `Next` or `"End": true`'
        if "Default" in state:
            yield from target(state["Default"], f"{at}.Default")
        for i, rule in enumerate(state.get("Choices", ())):
            yield from target(rule.get("Next"), f"{at}.Choices[{i}].Next")
        for i, catcher in enumerate(state.get("Catch", ())):
            yield from target(catcher.get("Next"), f"{at}.Catch[{i}].Next")
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from _scope_problems(state[key], f"{at}.{key}")
        for i, branch in enumerate(state.get("Branches", ())):
            yield from _scope_problems(branch, f"{at}.Branches[{i}]")
