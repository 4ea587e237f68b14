"""Building Waypoint prints no deprecation warning: setuptools warns about deprecated fields in
pyproject.toml (a `project.license` table, say) on every install, with a date after which such
builds fail. Built offline, with the setuptools installed here (the dev extras pin the one that
reads SPDX license expressions), from a copy of the checkout so no build files land in it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parents[1]
# Not part of the build: version control, environments, caches and earlier build output.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".sam-venv", ".bench-venvs", ".waypoint", "build", "dist", "*.egg-info",
    "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "tests",
)  # fmt: skip
LICENSE_EXPRESSIONS = (77, 0)  # the first setuptools that reads `license = "<SPDX>"`


def test_building_the_wheel_prints_no_deprecation_warning(tmp_path: Path) -> None:
    version = tuple(int(part) for part in setuptools.__version__.split(".")[:2])
    assert version >= LICENSE_EXPRESSIONS, (
        f"setuptools {setuptools.__version__} is too old to build Waypoint: install the dev "
        "extras (`make install`, or pip install -e '.[dev]')"
    )
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(tmp_path / "wheels"), str(source)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "deprecat" not in output.lower(), output
    (wheel,) = (tmp_path / "wheels").glob("waypoint-*.whl")
    assert wheel.stat().st_size > 0
