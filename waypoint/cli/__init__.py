"""`waypoint` — the command line: demo, chat, serve, init, validate, graph, test, publish, diff,
rollback.

Everything here runs the same engine, adapters and Lambda handlers as a deployment; the local
commands put moto in place of AWS and the offline model in place of OpenAI (unless
`OPENAI_API_KEY` is set or `--llm openai` is given).

The commands live by family — `running` (demo, chat, serve, studio), `authoring` (validate,
graph, schema, init), `testing` (test), `versions` (publish, diff, rollback) — and are
registered below, in the order `waypoint --help` lists them. `program` holds the typer app and
how failures are told; `options` what the commands share.
"""

from __future__ import annotations

from typing import Any

from waypoint.cli import authoring, running, testing, versions
from waypoint.cli.program import app

app.command()(running.demo)
app.command()(running.chat)
app.command()(running.serve)
app.command()(running.studio)
app.command()(authoring.validate)
app.command()(authoring.graph)
app.command("test")(testing.test_command)
app.command()(authoring.schema)
app.command()(versions.publish)
app.command()(versions.diff)
app.command()(versions.rollback)
app.command()(authoring.init)


def main() -> Any:
    """Console-script entry point."""
    return app()


__all__ = ["app", "main"]
