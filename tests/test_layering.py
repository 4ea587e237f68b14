"""Imports point one way: waypoint/ (CLI, local server) → functions/ → infra/ → engine/.

Read from the source with `ast`, so a lazy import inside a function counts as much as one at the
top of the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What each layer may never import (top-level package names).
FORBIDDEN: dict[str, set[str]] = {
    "engine": {
        "infra",
        "functions",
        "waypoint",
        "boto3",
        "botocore",
        "aioboto3",
        "openai",
        "fastapi",
        "starlette",
        "mangum",
        "httpx",
        "moto",
    },
    "infra": {"functions", "waypoint"},
    "functions": {"waypoint"},
}


def imported_packages(path: Path) -> set[str]:
    """Top-level package names a module imports anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_one_way(layer: str) -> None:
    offenders = []
    for module in sorted((ROOT / layer).rglob("*.py")):
        wrong = imported_packages(module) & FORBIDDEN[layer]
        if wrong:
            offenders.append(f"{module.relative_to(ROOT)} imports {', '.join(sorted(wrong))}")
    assert not offenders, "\n".join(offenders)
