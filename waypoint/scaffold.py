"""`waypoint init NAME`: a new agent project outside this repository, with Waypoint as a package.

The project holds what is the user's: `agent.yaml` (the behavior), `tools.py` (the `@tool`
functions and their `registry`), `tests/*.conv.yaml` (conversation tests that pass offline), a
README and a `.gitignore` — copied from `waypoint/scaffold_template/` with the project's name
filled in — and what deploys it:

- `template.yaml`: Waypoint's own SAM template (the same functions, IAM, queue and tool state
  machine), derived from it at init time by a few exact edits (`deployable_template`): the
  functions' code is the project folder (its `tools.py`), Waypoint and its dependencies come in a
  Lambda layer, and the defaults name this project's agent and tools module;
- `runtime/requirements.txt` and `runtime/wheels/`: what the layer installs — the Waypoint wheel
  (given with `--wheel`, else built from the checkout this runs from) and the tools' own
  dependencies — and `runtime/Makefile`, how `sam build` builds it (for arm64, with bytecode).
  Never `waypoint==VERSION` from the package index: that name on PyPI is another project (a Halo
  Waypoint client), so a name lookup would install someone else's code;
- `statemachine/tools.asl.json`: the tool state machine, copied from the installed Waypoint.

Nothing is overwritten: a target folder that exists and is not empty is refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from engine.agent_id import agent_id_problem
from engine.errors import WaypointError
from infra.aws.stack_files import checkout_root, stack_file

TEMPLATE_DIR = Path(__file__).resolve().with_name("scaffold_template")
ASL_FILE = "statemachine/tools.asl.json"
LAYER_DIR = "runtime"
WHEELS_DIR = f"{LAYER_DIR}/wheels"
_RENAMED = {"gitignore": ".gitignore"}  # dot files are easy to lose in packaging
_SKIPPED = {"__pycache__"}
_WHEEL_NAME = re.compile(r"^waypoint-(?P<version>[^-]+)-.+\.whl$")

# The edits that turn Waypoint's template into a project's: (what, exact old text, new text).
# Each old text must occur exactly once, so a changed template fails loudly here (and in
# tests/cli/test_scaffold.py) instead of yielding a template that deploys the wrong code.
_ROOT_CODE = """\
    # The code every function runs is Waypoint itself, in WaypointLayer (below); the function
    # package holds only the README of this folder, so a deploy uploads one layer, not the
    # checkout once per function.
    CodeUri: infra/aws/function_code/
"""
_PROJECT_CODE = """\
    # Each function's code is this project's folder (tools.py; sam build leaves out .venv and
    # caches); Waypoint and its dependencies are in WaypointLayer (below).
    CodeUri: .
"""
_ROOT_LAYER = """\
  # Waypoint and its dependencies for the functions' platform, compiled to bytecode, built by
  # `sam build` with the Makefile's build-WaypointLayer target (the recipe in
  # waypoint/scaffold_template/runtime/Makefile; docs/deploy.md §1). Lambda's layers are
  # read-only: without bytecode, every cold start would compile each module it imports again.
"""
_PROJECT_LAYER = """\
  # Waypoint and its dependencies for the functions' platform, installed from
  # runtime/requirements.txt and compiled to bytecode by runtime/Makefile when `sam build` runs.
  # Lambda's layers are read-only: without bytecode, every cold start would compile each module
  # it imports again.
"""


def _template_edits(agent_id: str) -> list[tuple[str, str, str]]:
    return [
        (
            "the agent answering channel messages",
            "    Default: bank\n    # engine/agent_id.py",
            f'    Default: "{agent_id}"\n    # engine/agent_id.py',
        ),
        (
            "the tools module",
            "    Default: examples.banking.tools\n",
            "    Default: tools   # tools.py in this project\n",
        ),
        ("where each function's code comes from", _ROOT_CODE, _PROJECT_CODE),
        ("what the layer is", _ROOT_LAYER, _PROJECT_LAYER),
        (
            "where the layer is built from",
            "      ContentUri: .\n",
            "      ContentUri: runtime/   # runtime/Makefile, runtime/requirements.txt\n",
        ),
    ]


class ScaffoldError(WaypointError):
    """`waypoint init` cannot create the project; the message says what to change."""


@dataclass(frozen=True)
class ScaffoldedProject:
    directory: Path
    agent_id: str
    files: tuple[Path, ...]  # relative to `directory`
    waypoint_requirement: str


def init_project(
    name: str, directory: Path | None = None, *, wheel: Path | None = None
) -> ScaffoldedProject:
    """Create the project `name` in `directory` (default: ./NAME). `wheel`: a Waypoint wheel to
    deploy (copied into the project), for a Waypoint that is not on the package index."""
    problem = agent_id_problem(name)
    if problem is not None:
        raise ScaffoldError(f"NAME {name!r} is not usable as the agent id: {problem}")
    target = (directory if directory is not None else Path.cwd() / name).resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(
            f"{target} already exists and is not empty; waypoint init never overwrites files. "
            "Choose another NAME or --directory."
        )
    with tempfile.TemporaryDirectory(prefix="waypoint-wheel-") as scratch:
        wheel_file = _waypoint_wheel(wheel, Path(scratch))
        wheel_bytes = wheel_file.read_bytes()
    requirement = _requirement(wheel_file.name)
    values = {"__PROJECT__": name, "__AGENT_ID__": name, "__WAYPOINT_REQUIREMENT__": requirement}

    files: dict[Path, str | bytes] = {}
    for source in sorted(TEMPLATE_DIR.rglob("*")):
        relative = source.relative_to(TEMPLATE_DIR)
        if source.is_dir() or _SKIPPED & set(relative.parts) or source.suffix == ".pyc":
            continue
        relative = relative.with_name(_RENAMED.get(relative.name, relative.name))
        files[relative] = _fill(source.read_text(encoding="utf-8"), values)
    files[Path("template.yaml")] = deployable_template(
        stack_file("template.yaml").read_text(encoding="utf-8"), agent_id=name
    )
    files[Path(ASL_FILE)] = stack_file(ASL_FILE).read_text(encoding="utf-8")
    files[Path(WHEELS_DIR) / wheel_file.name] = wheel_bytes

    target.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return ScaffoldedProject(target, name, tuple(sorted(files)), requirement)


def deployable_template(waypoint_template: str, *, agent_id: str) -> str:
    """Waypoint's SAM template made a project's: code from the project folder, Waypoint from the
    layer, this agent and `tools` as defaults. Raises `ScaffoldError` if an edit does not apply."""
    text = waypoint_template
    for what, old, new in _template_edits(agent_id):
        count = text.count(old)
        if count != 1:
            raise ScaffoldError(
                f"cannot set {what} in Waypoint's template.yaml: expected {old.strip()!r} once, "
                f"found it {count} times (update waypoint/scaffold.py with the template)"
            )
        text = text.replace(old, new)
    header = (
        f"# {agent_id}: Waypoint's SAM template (same functions, IAM, queue and tool state machine)\n"
        "# with this project's tools.py as the functions' code and Waypoint in a layer.\n"
        "# `sam build && sam deploy --guided`; see README.md.\n"
    )
    return header + text


def _waypoint_wheel(wheel: Path | None, scratch: Path) -> Path:
    """The Waypoint wheel the layer installs: `wheel`, else one built from the checkout this
    runs from. Never a name looked up on the package index: `waypoint` there is another project."""
    if wheel is not None:
        if _WHEEL_NAME.match(wheel.name) is None:
            raise ScaffoldError(
                f"--wheel {wheel}: not a Waypoint wheel (expected waypoint-VERSION-….whl; build "
                "one with `pip wheel --no-deps -w dist PATH/TO/WAYPOINT`)"
            )
        if not wheel.is_file():
            raise ScaffoldError(f"--wheel {wheel}: no such file")
        return wheel
    checkout = checkout_root() or _installed_from()
    if checkout is None:
        raise ScaffoldError(
            "this Waypoint was installed from a wheel: pass that wheel with --wheel PATH, so the "
            "deployed functions run the same Waypoint"
        )
    if checkout.is_file():  # installed from a wheel file that is still there: that one
        return _waypoint_wheel(checkout, scratch)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(scratch),
            str(checkout),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(scratch.glob("waypoint-*.whl"))
    if built.returncode != 0 or not wheels:
        raise ScaffoldError(
            f"could not build the Waypoint wheel from {checkout} (pip wheel exited "
            f"{built.returncode}: {built.stderr.strip()[-300:]}); build it yourself and pass --wheel"
        )
    return wheels[-1]


def _installed_from() -> Path | None:
    """Where the installed Waypoint came from, when pip recorded a local folder or wheel file
    (`pip install /path/to/waypoint`, PEP 610's direct_url.json) and it still exists."""
    try:
        raw = metadata.distribution("waypoint").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    url = str(json.loads(raw).get("url", "")) if raw else ""
    if not url.startswith("file://"):
        return None
    source = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    return source if source.exists() else None


def _requirement(wheel_name: str) -> str:
    return (
        "# Waypoint, from its wheel in wheels/ (a path relative to this folder, where the layer's\n"
        "# Makefile runs pip). Not `waypoint==…`: that name on PyPI belongs to another project.\n"
        f"./wheels/{wheel_name}"
    )


def _fill(text: str, values: dict[str, str]) -> str:
    for token, value in values.items():
        text = text.replace(token, value)
    return text
