"""Where the SAM template and the state machine files are, in a checkout and in a wheel.

In a source checkout (or an editable install) they are the repository's own `template.yaml` and
`statemachine/*.asl.json`. A wheel has no repository around it, so it ships copies of the same
files under `infra/aws/stack/` (made at build time by setup.py). The checkout's file wins when both
exist, so editing the template in a checkout is never shadowed by a stale copy.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT_ROOT = Path(__file__).resolve().parents[2]
PACKAGED_ROOT = Path(__file__).resolve().parent / "stack"


def stack_file(relative: str) -> Path:
    """The path of `relative` (e.g. "template.yaml", "statemachine/tools.asl.json"): the
    checkout's file, else the wheel's copy. A missing file is named with both places looked."""
    roots = (CHECKOUT_ROOT, PACKAGED_ROOT) if _in_checkout() else (PACKAGED_ROOT,)
    for root in roots:
        candidate = root / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{relative} is neither in the Waypoint checkout ({CHECKOUT_ROOT}) nor in the installed "
        f"package ({PACKAGED_ROOT}); reinstall Waypoint (pip install --force-reinstall waypoint)"
    )


def _in_checkout() -> bool:
    """True when this module runs from Waypoint's source tree, not from an installed package
    whose parent folder merely holds a `template.yaml` (e.g. a project with its own template)."""
    return (CHECKOUT_ROOT / "setup.py").is_file() and (CHECKOUT_ROOT / "engine").is_dir()


def checkout_root() -> Path | None:
    """Waypoint's source tree when running from one (a checkout or an editable install)."""
    return CHECKOUT_ROOT if _in_checkout() else None
