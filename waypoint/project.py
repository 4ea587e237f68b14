"""A project folder as `waypoint init` lays it out, found without being named:

    agent.yaml          the agent (or agent.yml, agent.json, agent.py)
    tools.py            its @tool registry — the agent's tools module unless --tools names one
    tests/*.conv.yaml   conversation tests, each naming its agent and tools

`waypoint validate` with no argument checks the project's agent with its tools, as `waypoint test`
runs them; a document's commands (`validate agent.yaml`, `chat agent.yaml`, …) find the tools.py
beside it (`waypoint.agent_source.tools_beside`).
"""

from __future__ import annotations

import os
from pathlib import Path

from waypoint.agent_source import AgentSource, CliProblem

AGENT_FILES = ("agent.yaml", "agent.yml", "agent.json", "agent.py")


def project_agents(directory: Path) -> list[AgentSource]:
    """The agents of the project in `directory`: its agent file, else every agent its
    conversation tests name (each with the tools the tests give it). A `CliProblem` saying what
    to give when there is none."""
    present = [name for name in AGENT_FILES if (directory / name).is_file()]
    if len(present) > 1:
        raise CliProblem(
            f"{directory} holds several agent files ({', '.join(present)}): name the one to "
            "check, e.g. waypoint validate agent.yaml"
        )
    if present:
        return [AgentSource(present[0])]
    from infra.conversation_tests import InvalidConversationTest, collect_tests

    try:
        tests = collect_tests(directory)
    except InvalidConversationTest as exc:
        raise CliProblem(str(exc)) from None
    named = dict.fromkeys((_relative(t.agent, directory), t.tools) for t in tests)
    if not named:
        raise CliProblem(
            f"no agent here: {directory} has no {', '.join(AGENT_FILES)} and no conversation "
            "tests (*.conv.yaml) naming one; give its path: waypoint validate path/to/agent.yaml"
        )
    return [AgentSource(agent, tools) for agent, tools in named]


def _relative(path: Path, directory: Path) -> str:
    """`path` as the user would type it from `directory`."""
    return os.path.relpath(path, directory) if path.is_absolute() else str(path)
