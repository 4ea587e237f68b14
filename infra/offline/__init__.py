"""The offline model provider: a deterministic heuristic for demos and tests — not a model.

`OfflineLLM` implements `engine.ports.SchematicLLM` with no API key and no network, so a new user
can watch a real agent (guidelines, journeys, tools) work end to end. It reads the prompts the
engine builds — their formats are fixed by the engine's pure prompt builders — and answers each
schema with simple, inspectable rules:

- guideline matching (`matching`): lexical similarity of each condition to the customer's latest
  message(s) — `infra.embeddings.HashingEmbedder` cosine plus concept overlap, a request naming
  the condition's head concept ("I'd like to make a transfer"), and the agent's glossary read as
  its synonyms' meaning — with conservative thresholds, and wording rules for greetings, thanks,
  off-topic questions, cancellations and yes/no answers;
- journey node selection (`journeys`): the step map parsed back (`journey_map`), values extracted
  by type (`values`, over `slots`, `shapes` and `choices`), a walk that follows the map's rules
  (abandonment, completeness, transitions by similarity and yes/no or success/failure polarity,
  never past a tool step that did not run); a request that starts a journey also reports the
  values a cue names for its later steps ("transfer 200 dollars"), which the engine keeps only
  when grounded;
- tool calls (`tools`): arguments from known values and the customer's words;
- composition (`compose`): the prompt read back (`compose_request`), instructions rephrased into
  sentences by patterns (`phrasing`), tool data quoted (`data_sentences`), approved templates
  chosen by similarity.

Domain neutral: no domain word lists in code. What words mean in a domain comes from the agent —
glossary synonyms, enum choices and the aliases a parameter's description states ("AAPL is
Apple"), the offered options of the agent's last message.

Known limits: English only — when the customer writes another language, it says so in their
language and decides nothing (`english_only`; a real model is needed for other languages); no
world knowledge; no synonyms beyond the agent's glossary and a few
everyday phrases (paraphrases outside them are missed: conditions then do not match, by design);
no reasoning across several messages beyond the latest customer message(s) and the agent's last
question; replies are plain and sometimes stiff. Usage is estimated (characters / 4); the model
name is `offline-heuristic`. Set `OPENAI_API_KEY` for a real model. `python -m bench eval` measures
it per decision kind (docs/BENCHMARKS.md).
"""

from infra.offline.llm import MODEL_NAME, OfflineLLM
from infra.offline.prompt import UnrecognizedPrompt

__all__ = ["MODEL_NAME", "OfflineLLM", "UnrecognizedPrompt"]
