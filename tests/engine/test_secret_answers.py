"""The customer's answer to a tool step that asks for a missing secret is masked whole, even
when the model walked past the chat step that should have collected it (found by the hostile
suite, tests/hostile: a walk straight to the login tool step left the typed password in clear)."""

from __future__ import annotations

from engine.privacy.secrets import MASK
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import advance, step_number, tool_harness
from tests.engine.test_secrets import (
    LOGINS,
    PASSWORD,
    auth_journey,
    auth_llm,
    everything_stored,
    login,
)


async def test_an_answer_to_a_tool_step_asking_for_a_secret_is_masked_whole() -> None:
    LOGINS.clear()
    auth = auth_journey()
    n = lambda node: step_number(auth[0], node)  # noqa: E731
    # Adversarial model: it tries to walk past the password question to the tool step, claiming
    # a password the customer never typed (a value nothing they said supports answers no step,
    # so the walk stops at the question), then misreads the answer (its tool plan names that
    # password again).
    invented = {"username": "seldo", "password": "hunter2"}
    llm = auth_llm(
        advance(n("user"), n("pass"), n("login"), collected=invented),
        advance(n("login")),
    )
    llm.on(
        ToolCallPlan,
        {
            "calls": [
                {
                    "tool": "login",
                    "arguments": [
                        {"name": "username", "value": "seldo"},
                        {"name": "password", "value": "hunter2"},
                    ],
                }
            ]
        },
    )
    h = tool_harness(llm, login, journeys=[auth])
    await h.start()
    first = await h.say("I need to log in as seldo")
    assert first.state.journey_paths["auth"][-1] == "pass"

    out = await h.say(f"it is {PASSWORD}")

    assert LOGINS == []
    assert out.new_events[0].text == MASK
    assert PASSWORD not in await everything_stored(h, [first.trace.turn_id, out.trace.turn_id])
