"""The process's one TLS context for outbound HTTPS (the LLM clients, the channels' client).

Building a context loads a CA bundle (~20–30 ms; httpx's default, certifi's, as much again for
each client built without one). The context is not bound to an event loop, so one per process
serves every client: the OpenAI adapters build a client per event loop, and a Lambda container
builds them, and the channels' client, in its init phase (`functions.worker_init`).
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """The system's trust store with Python's secure defaults (certificate and host checks)."""
    return ssl.create_default_context()
