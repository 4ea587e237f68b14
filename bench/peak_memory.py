"""A process's own peak memory, for `python -m bench compare` (both sides, the same way).

`resource.getrusage(RUSAGE_SELF).ru_maxrss` is not it in a child process: on Linux the
high-water mark of the address space a child was forked (or vforked) from is carried into its
`ru_maxrss` across `exec`, so a child of a 300 MB parent reports at least 300 MB however little
it uses. `VmHWM` in /proc/self/status is the peak resident set of the address space the process
has had since its `exec` — the interpreter, what it imported and what it ran, nothing of its
parent's.

Standard library only: `bench/reference_driver.py` loads it by name inside the reference's own
virtual environment.
"""

from __future__ import annotations

import resource
from pathlib import Path

STATUS = Path("/proc/self/status")
# The same reading as a snippet, for probes run with `python -c` (where this module is not on
# the path): it defines `_peak_rss_mb`.
PROBE_SOURCE = (
    "_peak_rss_mb = next(int(line.split()[1]) for line in open('/proc/self/status') "
    "if line.startswith('VmHWM:')) / 1024\n"
)


def peak_rss_mb(status: Path = STATUS) -> float:
    """This process's peak resident set since its `exec`, in MB (VmHWM). Where there is no
    /proc (not Linux), `ru_maxrss`, which may include the parent's (see the module's docstring)."""
    try:
        for line in status.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
