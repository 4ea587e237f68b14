"""What the Lambda layer ships, so a benchmark's fresh process imports only that.

The development environment holds more than the layer: the dev and test extras (selenium brings
trio, which `httpcore2` imports when it finds it: ~85 ms), and the command-line packages the
layer's recipe removes (`LAYER_CLI_ONLY` in waypoint/scaffold_template/runtime/Makefile: rich,
click … which `httpx` imports for its own CLI when present: ~50 ms). A cold start measured here
with them would time imports no Lambda container makes.

`unshipped_modules()` names every top-level module installed here whose distribution the layer
does not ship: the closure of Waypoint's own requirements (no extras), minus the CLI-only
packages. `bench.cold_worker` refuses them (an import hook installed before its clock starts,
from `REFUSED_ENV`): code that tolerates a missing optional package (as httpx and httpcore2 do)
then behaves as in Lambda; code that needs one fails loudly.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
REFUSED_ENV = "WAYPOINT_BENCH_NOT_IN_LAYER"  # comma-separated top-level module names
LAYER_MAKEFILE = ROOT / "waypoint" / "scaffold_template" / "runtime" / "Makefile"


def cli_only_packages(makefile: Path = LAYER_MAKEFILE) -> frozenset[str]:
    """The packages the layer's recipe deletes after installing (`LAYER_CLI_ONLY`)."""
    match = re.search(r"^LAYER_CLI_ONLY \?= (.+)$", makefile.read_text(encoding="utf-8"), re.M)
    if match is None:
        raise RuntimeError(f"no LAYER_CLI_ONLY in {makefile}")
    return frozenset(canonicalize_name(name) for name in match.group(1).split())


def shipped_distributions(project: str = "waypoint") -> frozenset[str]:
    """`project` and every distribution its requirements (without its extras) pull in."""
    seen: set[tuple[str, frozenset[str]]] = set()
    pending: list[tuple[str, frozenset[str]]] = [(project, frozenset())]
    while pending:
        name, extras = pending.pop()
        if (canonicalize_name(name), extras) in seen:
            continue
        seen.add((canonicalize_name(name), extras))
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # a marker-selected dependency not installed here
        for text in requirements:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate({"extra": extra}) for extra in (extras or {""})
            ):
                continue
            pending.append((requirement.name, frozenset(requirement.extras)))
    return frozenset(name for name, _ in seen)


def unshipped_modules() -> frozenset[str]:
    """Top-level modules installed here whose distributions the layer does not ship."""
    shipped = shipped_distributions() - cli_only_packages()
    return frozenset(
        module
        for module, distributions in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in shipped for d in distributions)
    )


def refused_env() -> dict[str, str]:
    """The environment variable a `bench.cold_worker` process reads to refuse those modules."""
    return {REFUSED_ENV: ",".join(sorted(unshipped_modules()))}
