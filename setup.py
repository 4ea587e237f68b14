"""Build hook: the wheel carries the SAM template and the state machine files.

`template.yaml` and `statemachine/*.asl.json` live at the repository root (SAM and the tests read
them there), outside any package. An installed Waypoint still needs them: the local stack builds
its tables and queues from the template, the tool dispatcher runs the ASL file, and `waypoint init`
copies the ASL file into a new project. So the wheel ships copies under `infra/aws/stack/`, made
here at build time from the one source; `infra.aws.stack_files` finds them. Everything else is in
pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STACK_FILES = [
    "template.yaml",
    *(p.relative_to(ROOT).as_posix() for p in sorted(ROOT.glob("statemachine/*.asl.json"))),
]


class BuildWithStackFiles(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "infra" / "aws" / "stack"
        for name in STACK_FILES:
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, destination)


setup(cmdclass={"build_py": BuildWithStackFiles})
