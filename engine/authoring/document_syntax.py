"""Where a YAML or JSON document stops parsing, told to the person who wrote it.

PyYAML says what its parser expected (`expected <block end>, but found '<block mapping start>'
in "<unicode string>", line 27, column 13`): no file, and not what the author did. Here the same
error becomes the file, line and column (`agent.yaml:27:13`, as editors link it), the line itself
with a caret under the spot (and the line above it, for indentation), and the likely cause with
its fix: a tab, a key out of line with its neighbours, a missing colon, a colon inside an
unquoted value, an unclosed bracket or quote, a trailing comma.

    agent.yaml:22:4: not valid YAML: this line does not line up with the lines above it
       21 |   - id: stock
       22 |    condition: The customer asks if something is in stock
          |    ^
    hint: line 22 starts in column 4 and line 21's keys in column 5: the keys of one mapping, …

Pure text work over the parser's marks: the spot is only ever found in the document itself.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

# PyYAML's line breaks (its marks count lines by these), not str.splitlines()'s longer list.
_YAML_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_WIDEST_LINE = 100  # longer lines are shown as a window around the spot


@dataclass(frozen=True)
class SyntaxSpot:
    """Where a document breaks (1-based line and column), what is wrong there, and the likely
    cause with its fix when one can be told."""

    line: int
    column: int
    problem: str
    hint: str | None = None


def describe_syntax_error(error: Exception, text: str, kind: str, where: str) -> str:
    """The message for `text` (a YAML or JSON document, `kind`) that raised `error` while
    parsing: `where:line:column: not valid YAML: …`, the line with a caret, and a hint."""
    spot = yaml_spot(error, text) if kind == "yaml" else json_spot(error, text)
    if spot is None:  # not a parse error with a position (a reader error, say)
        return f"{where}: not valid {kind.upper()}: {error}"
    lines = [f"{where}:{spot.line}:{spot.column}: not valid {kind.upper()}: {spot.problem}"]
    lines += excerpt(_lines(text, kind), spot.line, spot.column)
    if spot.hint:
        lines.append(f"hint: {spot.hint}")
    return "\n".join(lines)


def excerpt(lines: list[str], line: int, column: int) -> list[str]:
    """The line (and the non-blank line above it), numbered, with a caret under `column`.
    Tabs show as `→` (they are usually the problem); long lines as a window around the spot."""
    shown = [line]
    above = next((n for n in range(line - 1, 0, -1) if lines[n - 1].strip()), None)
    if above is not None:
        shown.insert(0, above)
    width = len(str(line))
    out = []
    for number in shown:
        text = lines[number - 1] if number <= len(lines) else ""
        start = 0
        if len(text) > _WIDEST_LINE:  # the window around the spot
            start = max(0, min(column - 1 - _WIDEST_LINE // 2, len(text) - _WIDEST_LINE))
        window = text[start : start + _WIDEST_LINE].replace("\t", "→")
        before, after = ("…" if start else ""), ("…" if start + _WIDEST_LINE < len(text) else "")
        out.append(f"  {number:>{width}} | {before}{window}{after}")
        if number == line:
            lead = ("…" if start else "") + text[start : max(start, column - 1)]
            out.append(f"  {'':>{width}} | {' ' * _display_width(lead)}^")
    return out


def _display_width(text: str) -> int:
    """Columns `text` takes in a terminal: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _lines(text: str, kind: str) -> list[str]:
    return _YAML_LINE_BREAK.split(text) if kind == "yaml" else text.split("\n")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_column(line: str) -> int:
    """The 1-based column where a line's content starts, after any list dashes (`- key:`)."""
    column = _indent(line)
    while line[column : column + 2] == "- ":
        column += 2
        while line[column : column + 1] == " ":
            column += 1
    return column + 1


def _line_above(lines: list[str], line: int) -> int | None:
    """The nearest line above `line` (1-based) with content other than a comment."""
    for number in range(line - 1, 0, -1):
        stripped = lines[number - 1].strip()
        if stripped and not stripped.startswith("#"):
            return number
    return None


def _has_key(line: str) -> bool:
    """Whether a line holds `key:` (a colon ending the line or followed by a space)."""
    content = line.strip().removeprefix("- ")
    return content.endswith(":") or ": " in content


# ------------------------------------------------------------------------------------------------
# YAML


def yaml_spot(error: Exception, text: str) -> SyntaxSpot | None:
    """The spot of a PyYAML error in `text`, or None when it carries no position."""
    import yaml

    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return None
    lines = _lines(text, "yaml")
    problem = error.problem or ""
    context = error.context or ""
    mark, opened = error.problem_mark, error.context_mark
    line, column = mark.line + 1, mark.column + 1
    here = lines[mark.line] if mark.line < len(lines) else ""
    if "'\\t'" in problem or "\t" in here[: _indent(here) + 1]:
        tab = here.find("\t")
        return SyntaxSpot(
            line,
            tab + 1 if tab >= 0 else column,
            "a tab character",
            "YAML indents with spaces only, and a tab cannot start a value: replace the tab "
            "with spaces",
        )
    if "could not find expected ':'" in problem and opened is not None:
        return _missing_colon(lines, opened.line + 1, opened.column + 1)
    if "mapping values are not allowed here" in problem:
        return _unexpected_colon(lines, line, column)
    if problem.startswith("expected <block end>"):
        return _out_of_line(lines, line, column, problem)
    if context.startswith("while parsing a flow") and opened is not None:
        bracket = "[" if "sequence" in context else "{"
        closing = "]" if bracket == "[" else "}"
        return SyntaxSpot(
            opened.line + 1,
            opened.column + 1,
            f"a `{bracket}` that is not closed where it should be",
            f"close it with `{closing}` (and put commas between its items); the parser stopped "
            f"at line {line}, column {column}",
        )
    if "quoted scalar" in context and opened is not None:
        if "escape character" in problem:
            return SyntaxSpot(
                line,
                column,
                f"an unknown escape inside double quotes ({problem.removeprefix('found ')})",
                'in double quotes a backslash starts an escape (\\n, \\t, \\"): write the '
                "value in single quotes ('\\d{4}'), or double the backslash",
            )
        return SyntaxSpot(
            opened.line + 1,
            opened.column + 1,
            "a quote that is never closed",
            f"add the closing quote; the parser read on to line {line} looking for it",
        )
    if "undefined alias" in problem:
        return SyntaxSpot(
            line,
            column,
            problem.removeprefix("found "),
            "`*name` repeats what an anchor `&name` marked earlier; to write text that starts "
            "with `*`, put it in quotes",
        )
    if "another document" in problem:
        return SyntaxSpot(
            line,
            column,
            "a second document in the file",
            "a file holds one document: remove this `---` (or what follows it)",
        )
    if "cannot start any token" in problem:
        return SyntaxSpot(
            line,
            column,
            problem.removeprefix("found "),
            "put the value in quotes: characters like @ and ` cannot start plain YAML text",
        )
    words = f"{context}: {problem}" if context else problem
    return SyntaxSpot(line, column, words)


def _missing_colon(lines: list[str], line: int, column: int) -> SyntaxSpot:
    text = lines[line - 1] if line <= len(lines) else ""
    return SyntaxSpot(
        line, column, "a key without a colon", _colon_hint(text, f"line {line}", continued=True)
    )


def _colon_hint(text: str, which: str, *, continued: bool) -> str:
    """How to give `text` (a line that should be `key: value`) its colon."""
    stripped = text.strip()
    dash = "- " if stripped.startswith("- ") else ""
    key, _, rest = stripped.removeprefix("- ").partition(" ")
    fixed = f"{dash}{key}:{' ' + rest if rest else ''}"
    also = (
        "; if it continues the text above, indent it further than that text's key"
        if continued
        else ""
    )
    return f"{which} needs a colon after its key: `{fixed}`{also}"


def _unexpected_colon(lines: list[str], line: int, column: int) -> SyntaxSpot:
    here = lines[line - 1] if line <= len(lines) else ""
    before = here[: column - 1]
    if ": " in before.strip().removeprefix("- "):  # a second `: ` on a `key: value` line
        key, _, value = here.strip().removeprefix("- ").partition(": ")
        quoted = value.replace('"', '\\"')
        return SyntaxSpot(
            line,
            column,
            "a colon inside a value that is not quoted",
            f'a value that contains ": " must be in quotes: `{key}: "{quoted}"`',
        )
    above = _line_above(lines, line)
    if above is not None and not _has_key(lines[above - 1]):
        return SyntaxSpot(
            above,
            _key_column(lines[above - 1]),
            "a key without a colon",
            _colon_hint(lines[above - 1], f"line {above}", continued=False)
            + f" (without it, line {line} reads as more of its text)",
        )
    if above is not None and _indent(here) > _indent(lines[above - 1]):
        return SyntaxSpot(
            line,
            _indent(here) + 1,
            "this line is indented more than the key above it",
            f"line {line} starts in column {_indent(here) + 1} and line {above} in column "
            f"{_key_column(lines[above - 1])}, so it reads as part of line {above}'s value: "
            f"line it up with that key, or leave line {above}'s value empty (`key:`) to nest "
            "a mapping under it",
        )
    return SyntaxSpot(line, column, "a colon where no key can start")


def _out_of_line(lines: list[str], line: int, column: int, problem: str) -> SyntaxSpot:
    here = lines[line - 1] if line <= len(lines) else ""
    if "'<scalar>'" in problem and any(q in here[: column - 1] for q in "\"'"):
        return SyntaxSpot(
            line,
            column,
            "more text after a quoted value",
            "put the whole value inside the quotes (or nothing after the closing quote but a "
            "comment)",
        )
    above = _line_above(lines, line)
    detail = ""
    if above is not None:
        detail = (
            f"line {line} starts in column {_indent(here) + 1}, line {above} above it "
            f"in column {_indent(lines[above - 1]) + 1}"
        )
        if lines[above - 1].strip().startswith("- "):
            detail += f" (its keys in column {_key_column(lines[above - 1])})"
        detail += ": "
    return SyntaxSpot(
        line,
        _indent(here) + 1,
        "this line does not line up with the lines above it",
        f"{detail}the keys of one mapping, and the items (`- `) of one list, start in the "
        "same column — indent with spaces to the level this line belongs to",
    )


# ------------------------------------------------------------------------------------------------
# JSON


def json_spot(error: Exception, text: str) -> SyntaxSpot | None:
    """The spot of a `json.JSONDecodeError` in `text`, or None for any other error."""
    if not isinstance(error, json.JSONDecodeError):
        return None
    message, position = error.msg, error.pos
    found = text[position : position + 1]
    line, column = error.lineno, error.colno
    if message.startswith("Expecting property name") or (
        message == "Expecting value" and found in "]}" and found
    ):
        if found in "]}":
            comma = text[:position].rstrip()
            if comma.endswith(","):
                at = _position(text, len(comma) - 1)
                return SyntaxSpot(
                    *at,
                    f"a comma after the last item, before `{found}`",
                    "JSON allows no trailing comma: remove it",
                )
        if found == "'":
            return SyntaxSpot(line, column, "a single quote", 'JSON strings use double quotes: "…"')
        if message.startswith("Expecting property name"):
            return SyntaxSpot(
                line, column, "a key that is not a string", 'keys are in double quotes: "name"'
            )
    if message == "Expecting value":
        if not text[position:].strip():
            return SyntaxSpot(line, column, "the document ends where a value should be")
        if found == "'":
            return SyntaxSpot(line, column, "a single quote", 'JSON strings use double quotes: "…"')
        return SyntaxSpot(
            line,
            column,
            "a value is missing here, or is not JSON",
            "text goes in double quotes; true, false and null are written in lower case",
        )
    if message == "Expecting ',' delimiter":
        end = len(text[:position].rstrip())
        return SyntaxSpot(
            *_position(text, end),
            "a missing comma",
            "items of a list, and members of an object, are separated by commas",
        )
    if message == "Expecting ':' delimiter":
        return SyntaxSpot(line, column, "a key without a colon", 'write "key": value')
    if message.startswith("Unterminated string"):
        return SyntaxSpot(
            line,
            column,
            "a string that is never closed",
            "add the closing double quote; a string cannot span lines (write \\n inside it)",
        )
    if message.startswith("Invalid control character"):
        return SyntaxSpot(
            line,
            column,
            "a line break or tab inside a string",
            "write it as \\n or \\t, or close the string before the line ends",
        )
    if message.startswith("Invalid \\escape"):
        return SyntaxSpot(
            line,
            column,
            "an unknown escape",
            "a backslash in a string starts an escape: write \\\\",
        )
    if message == "Extra data":
        return SyntaxSpot(
            line,
            column,
            "more text after the end of the document",
            "a file holds one JSON value: a stray bracket, or a second document?",
        )
    return SyntaxSpot(line, column, message)


def _position(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of `text[index]`."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1
