"""Waypoint benchmarks: `python -m bench` (or `make bench`).

Per-turn LLM cost (rounds, calls, tokens) and wall time under a latency model, the engine's own
overhead split by stage (in-memory and on moto), scaling with the number of guidelines,
embeddings in S3, cold start, and a side-by-side with the reference implementation's figures.
Results are printed and written to docs/BENCHMARKS.md. Benchmarks, not timed tests: nothing here
asserts a duration; the targets are reported as PASS / MISS with their margins.
"""
