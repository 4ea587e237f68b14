"""The `waypoint` command and the local server: they host the Lambda apps of `functions/`, so
they sit above it (imports point CLI → functions → infra → engine)."""
