"""The typer program behind `waypoint`: its `--debug` option, and every command's failure told
in one line saying what to do. The commands themselves are registered in `waypoint.cli`."""

from __future__ import annotations

import os
import traceback
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from waypoint.agent_source import AgentProblems, CliProblem, failure_summary

console = Console()
# Piped or redirected, a line stays one line (rich would wrap it at 80 columns): pasted export
# lines, grep and logs get what was printed. A terminal wraps long lines itself.
console.soft_wrap = not console.is_terminal
DEBUG_ENV = "WAYPOINT_DEBUG"


class OneLineErrors(TyperGroup):
    """Every command's failure as one line saying what to do — a traceback only with --debug
    (or WAYPOINT_DEBUG=1)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if _command_line_control(exc):  # exits, aborts, usage errors: printed by click
                raise
            raise _told(exc) from None


def _command_line_control(exc: Exception) -> bool:
    """typer's and click's own exceptions (typer vendors a click of its own)."""
    return type(exc).__module__.split(".")[0] in ("click", "typer")


def _told(exc: Exception) -> typer.Exit:
    """Print `exc` the way the user should see it; the exit to raise. Re-raises it under
    --debug when nobody planned for it (its traceback is the point then)."""
    if isinstance(exc, AgentProblems):
        _print_problems(exc)
        return typer.Exit(exc.code)
    if isinstance(exc, CliProblem):
        if _debugging() and exc.__cause__ is not None:
            console.print("".join(traceback.format_exception(exc.__cause__)), markup=False)
        console.print(f"[red]✗ {escape(str(exc))}[/red]")
        return typer.Exit(exc.code)
    if _debugging():
        raise exc
    console.print(
        f"[red]✗ {escape(failure_summary(exc))}[/red]\n  Run again with --debug for the traceback."
    )
    return typer.Exit(1)


def tell(exc: CliProblem) -> None:
    """Print a problem the way a failing command tells it, without exiting (a command that
    goes on to its next item)."""
    _told(exc)


def _debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


app = typer.Typer(
    help="Waypoint: serverless agents that follow business rules.",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineErrors,
)


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", help="show tracebacks and the local stack's logs")
    ] = False,
) -> None:
    """Waypoint: serverless agents that follow business rules."""
    if debug:
        os.environ[DEBUG_ENV] = "1"


def _print_problems(exc: AgentProblems) -> None:
    console.print(f"[red]✗ {escape(str(exc))}[/red]")
    for problem in exc.problems:
        # Paths like `guidelines[greet]` are not terminal markup: print them as written. A
        # problem may quote its line with a caret under the spot (document_syntax): indented
        # under the bullet and never wrapped, or the caret would point elsewhere.
        shown = escape(problem).replace("\n", "\n    ")
        console.print(f"  • {shown}", soft_wrap=True, highlight=False)
    console.print("Fix them and run [bold]waypoint validate[/bold] again.")
