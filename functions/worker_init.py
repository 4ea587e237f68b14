"""The turn worker's Lambda init phase: what the import of `functions.worker` runs in a Lambda
container, before any customer waits.

Lambda imports the handler module once per container, before the first invocation (the init
phase, with its own 10 s limit). When `AWS_LAMBDA_FUNCTION_NAME` says this process is a Lambda
container, `init_container()` builds there what the first turn would otherwise build while a
customer waits (`infra.runtime.Runtime.prepare_for_turns`: the stores and boto3 clients, the LLM
and embedder with `openai` imported and their clients connected, the engine, the channels'
outbound HTTP client only when a channel sends). Tests, the CLI and the local server have no such
variable: their runtime is still built on first use, as before.

The garbage collector is paused for the whole init phase (`enter_init_phase`, the first thing
`functions.worker` does, which also keeps numpy's OpenBLAS to one thread): importing ~1,700 modules and building the clients ran ~380 collections,
150–300 ms of a cold start, for almost no garbage. At the end, everything built so far is frozen
(`gc.freeze()`) and collection resumes: the modules, models and clients a warm container keeps
for its whole life are out of the tracked generations, so a full collection during a turn no
longer walks them (one pass over them cost a turn ~17 ms, ten times its engine CPU). What little
garbage the init left is frozen with them, once: collecting it first would be one more full pass.

A failing init (a bad configuration) does not fail the import: the error is logged with what to
fix, and the first invocation builds the same part again and fails the same way — the whole
invocation when the settings themselves cannot be read (Lambda retries the batch), each record as
a batch item failure when a part of the runtime cannot be built (SQS delivers it again). No
message is lost either way.
"""

from __future__ import annotations

import gc
import os
import time

LAMBDA_FUNCTION_ENV = "AWS_LAMBDA_FUNCTION_NAME"  # set by Lambda in every function's container
# numpy's OpenBLAS starts a thread per CPU at import, and they spin: ~170 ms of CPU in this init,
# on a function with a fraction of one vCPU (the worker's 1,024 MB: 0.58). The engine's vector
# products are small: one thread does them as fast.
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"

_outcome: bool | None = None  # whether the init built the runtime, once it ran


def in_lambda_container() -> bool:
    """Whether this process is a Lambda container (not a test, the CLI or the local server)."""
    return bool(os.environ.get(LAMBDA_FUNCTION_ENV))


def enter_init_phase() -> None:
    """In a Lambda container, before the worker's imports: no garbage collection until
    `init_container` has run (it freezes what the init built, then resumes collection), and one
    OpenBLAS thread for numpy (`BLAS_THREADS_ENV`, unless set). Elsewhere, nothing changes."""
    if in_lambda_container() and _outcome is None:
        gc.disable()
        os.environ.setdefault(BLAS_THREADS_ENV, "1")


def init_container() -> bool:
    """Build the container's runtime for turns, then freeze the garbage collector; once per
    process. Returns whether the runtime was built (False: logged, built again on first use)."""
    from functions.worker_telemetry import logger
    from infra.runtime import current_runtime

    global _outcome
    if _outcome is not None:
        return _outcome
    _outcome = False
    started = time.perf_counter()
    try:
        current_runtime().prepare_for_turns()
    except Exception as exc:
        logger.exception(
            "the worker's init failed; every invocation will build the failing part again and "
            "fail the same way until the configuration is fixed (the messages stay queued)",
            extra={"error": f"{type(exc).__name__}: {exc}"},
        )
        return False
    finally:
        gc.freeze()
        gc.enable()
    _outcome = True
    logger.info(
        "worker initialized",
        extra={"init_ms": round((time.perf_counter() - started) * 1000, 1)},
    )
    return True


__all__ = [
    "BLAS_THREADS_ENV",
    "LAMBDA_FUNCTION_ENV",
    "enter_init_phase",
    "in_lambda_container",
    "init_container",
]
