"""`python -m bench eval`: the labelled evaluation set for every decision the engine asks a model
to make, asked exactly as a real turn asks it.

Cases are data (`bench/eval/cases/*.yaml`, one file per decision kind) about small agents written
as ordinary agent documents (`bench/eval/agents/*.yaml`). Each case is put in the state of the
turn that decides it (`bench.eval.turn_state`) and the turn's own stage functions ask the chosen
provider (the offline model, or any OpenAI-compatible model) and read its answer: recall and the
match round's batches — the packed prompt every recalled guideline shares, not one guideline at a
time — node selection, the tool stage's planning and then the action gate (`bench.eval.decisions`).
The outcome is compared with the label. The report gives accuracy per decision kind with tokens
and latency, so a prompt change or a model can be judged by the same numbers. See
docs/BENCHMARKS.md.

The set is split, once and for all, into a development part and a held-back test part by
scenario (`bench.eval.cases.part_of`: a scenario — a case, with the cases paraphrasing it — is
held back when the SHA-256 of its name is divisible by 3). A change to the offline model or to the
prompts is judged on the test part only: `--failures` lists the development part's failures, and
the test part's only when asked for by name (`--part test`).

`python -m bench eval --llm openai --model M` scores a real model in one command: the whole set's
run writes M's dated section into docs/BENCHMARKS.md (`bench.eval.model_runs`).
"""
