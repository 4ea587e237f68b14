"""`python -m bench eval`: the labelled evaluation set for every decision the engine asks a model
to make, run through the engine's real prompt builders, schemas and answer verification.

Cases are data (`bench/eval/cases/*.yaml`, one file per decision kind) about small agents written
as ordinary agent documents (`bench/eval/agents/*.yaml`). The runner builds each case's prompt with
the engine's own builder, asks the chosen provider (the offline model, or any OpenAI-compatible
model), interprets the answer the way a turn does, and compares the outcome with the label.
The report gives accuracy per decision kind with tokens and latency, so a prompt change or a
model can be judged by the same numbers. See docs/BENCHMARKS.md.
"""
