"""The stages of one engine turn, in pipeline order (see `engine.turn.TurnPipeline.run`):

recall → match → activation → relationships → tools → compose → new_state.

Each stage is a function over the turn's working state (`state.TurnState`); `journey_progress`
and `interrupts` hold the moves several stages share. docs/architecture.md says what each stage
reads and writes.
"""
