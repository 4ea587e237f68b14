"""`python -m bench languages`: which language-identification library reads short customer
messages best, and what it costs.

Every candidate (`bench.language_candidates`) runs through the engine's own steps
(`engine.language.detection.read_language`: addresses, numbers and "ok" dropped, the script
deciding Japanese, Korean and Chinese, the library ranking the rest) over the labelled messages
in bench/language_cases: once over every language it knows ("all"), once over the eight shipped
languages' bases ("shipped": en es pt fr de ja zh). The confidence threshold under which a
message is in no language is chosen on the development part only; the test part is held back.
Import time, first-call time and determinism are measured in fresh interpreters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.language_candidates import Candidate
from engine.language.detection import Ranking, candidate_languages, read_language
from engine.language.tags import SHIPPED

CASES_DIR = Path(__file__).with_name("language_cases")
ROOT = Path(__file__).resolve().parents[1]
MODES = ("all", "shipped")
SHORT = 10  # characters: a "short" message
# A "zh-Hans"/"zh-Hant" label needs the script; a "zh" label (the same characters in both) "zh".


@dataclass(frozen=True)
class Case:
    text: str
    label: str | None  # None: the message is in no language
    also: tuple[str | None, ...] = ()  # other right answers ("hallo": de or nl)
    part: str = "dev"


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    """Every case file's messages, in file and list order."""
    cases = []
    for path in sorted(directory.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for part in ("dev", "test"):
            for item in data.get(part) or []:
                if isinstance(item, str):
                    cases.append(Case(item, data["language"], part=part))
                else:
                    label = item.get("language", data["language"])
                    cases.append(Case(item["text"], label, tuple(item.get("also", ())), part))
    return cases


@dataclass
class Answer:
    """One case read without a threshold: the answer, and the library's confidence in it (None
    when the script or the steps decided, with no library asked)."""

    language: str | None
    confidence: float | None

    def at(self, threshold: float) -> str | None:
        if self.confidence is not None and self.confidence < threshold:
            return None
        return self.language


@dataclass
class ModeResult:
    candidate: str
    mode: str
    status: str = "ok"
    threshold: float = 0.0
    accuracy: dict[str, float] = field(default_factory=dict)  # dev, test
    short: dict[str, float] = field(default_factory=dict)  # part → accuracy on < 10 chars
    none_rate: dict[str, float] = field(default_factory=dict)  # part → None on no-language
    silenced: dict[str, float] = field(default_factory=dict)  # part → None on a language
    per_language: dict[str, dict[str, float]] = field(default_factory=dict)  # label → part → acc
    median_us: float = 0.0
    p95_us: float = 0.0
    answers: list[str | None] = field(default_factory=list)


def expected(case: Case, answer: str | None, allowed: frozenset[str] | None) -> bool:
    """Whether `answer` is right for `case`. Over a restricted set, a message in a language
    outside it is right when the answer names no allowed language (the session stays as it was)."""
    if answer == case.label or answer in case.also:
        return True
    if case.label is None or allowed is None or _code(case.label) in allowed:
        return False
    return answer is None or _code(answer) not in allowed


def _code(tag: str) -> str:
    return tag.split("-")[0]


def read_all(
    cases: Sequence[Case], candidate: Candidate, allowed: frozenset[str] | None
) -> list[Answer]:
    """Each case's answer before any threshold."""
    ranker = candidate.build(allowed)
    answers = []
    for case in cases:
        seen: list[Ranking] = []

        def recording(text: str, _seen: list[Ranking] = seen) -> Ranking:
            ranking = ranker(text)
            _seen.append(ranking)
            return ranking

        language = read_language(
            case.text, recording, allowed=allowed, min_confidence=float("-inf")
        )
        confidence = seen[0][0][1] if seen and seen[0] else None
        answers.append(Answer(language, confidence if language is not None else None))
    return answers


def tune(cases: Sequence[Case], answers: Sequence[Answer], allowed: frozenset[str] | None) -> float:
    """The threshold with the best accuracy on the development part (the lowest such)."""
    dev = [(c, a) for c, a in zip(cases, answers, strict=True) if c.part == "dev"]
    options = sorted({0.0, *(a.confidence for _, a in dev if a.confidence is not None)})
    # Just above each seen confidence: the threshold that silences it.
    options = sorted({*options, *(o + 1e-9 for o in options)})
    best, best_score = 0.0, -1
    for t in options:
        score = sum(expected(c, a.at(t), allowed) for c, a in dev)
        if score > best_score:
            best, best_score = t, score
    return best


def score(candidate: Candidate, mode: str, cases: Sequence[Case]) -> ModeResult:
    """One candidate in one mode: tuned on dev, scored on both parts, timed per message."""
    allowed = None if mode == "all" else candidate_languages(SHIPPED)
    result = ModeResult(candidate.name, mode)
    try:
        answers = read_all(cases, candidate, allowed)
    except ImportError as error:
        result.status = f"not installed ({error.name})"
        return result
    fixed = candidate.fixed_threshold
    result.threshold = tune(cases, answers, allowed) if fixed is None else fixed
    final = [a.at(result.threshold) for a in answers]
    result.answers = final
    for part in ("dev", "test"):
        pairs = [(c, f) for c, f in zip(cases, final, strict=True) if c.part == part]
        languages = [(c, f) for c, f in pairs if c.label is not None]
        nones = [(c, f) for c, f in pairs if c.label is None]
        short = [(c, f) for c, f in pairs if len(c.text) < SHORT]
        result.accuracy[part] = _share(pairs, allowed)
        result.short[part] = _share(short, allowed)
        result.none_rate[part] = sum(f is None for _, f in nones) / len(nones) if nones else 0.0
        served = [
            (c, f) for c, f in languages if allowed is None or _code(c.label or "") in allowed
        ]
        result.silenced[part] = sum(f is None for _, f in served) / len(served)
        for label in sorted({_group(c) for c, _ in pairs}):
            group = [(c, f) for c, f in pairs if _group(c) == label]
            result.per_language.setdefault(label, {})[part] = _share(group, allowed)
    result.median_us, result.p95_us = _timing(candidate, allowed, result.threshold, cases)
    return result


def _group(case: Case) -> str:
    return "none" if case.label is None else case.label


def _share(pairs: Sequence[tuple[Case, str | None]], allowed: frozenset[str] | None) -> float:
    return sum(expected(c, f, allowed) for c, f in pairs) / len(pairs) if pairs else float("nan")


def _timing(
    candidate: Candidate, allowed: frozenset[str] | None, threshold: float, cases: Sequence[Case]
) -> tuple[float, float]:
    """Median and p95 of the whole reading per message (µs), warm, over three passes."""
    from bench.stats import median, p95

    ranker = candidate.build(allowed)
    read_language(cases[0].text, ranker, allowed=allowed, min_confidence=threshold)
    samples = []
    for _ in range(3):
        for case in cases:
            started = time.perf_counter()
            read_language(case.text, ranker, allowed=allowed, min_confidence=threshold)
            samples.append((time.perf_counter() - started) * 1e6)
    return median(samples), p95(samples)


# -- fresh interpreters: import, first call, determinism -------------------------------------

_PROBE = """
import json, sys, time
started = time.perf_counter()
import {module}
imported = time.perf_counter() - started
from bench.language_candidates import CANDIDATES
from bench.language_detection import answers_digest
candidate = next(c for c in CANDIDATES if c.name == {name!r})
print(json.dumps({{"import_ms": imported * 1000, **answers_digest(candidate, {mode!r})}}))
"""


def answers_digest(candidate: Candidate, mode: str) -> dict[str, object]:
    """The first call's time (the ranker built, a model loaded) and a digest of every answer."""
    import hashlib

    allowed = None if mode == "all" else candidate_languages(SHIPPED)
    cases = load_cases()
    started = time.perf_counter()
    ranker = candidate.build(allowed)
    read_language(cases[0].text, ranker, allowed=allowed, min_confidence=0.0)
    first = time.perf_counter() - started
    answers = [read_language(c.text, ranker, allowed=allowed, min_confidence=0.0) for c in cases]
    digest = hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:12]
    return {"first_call_ms": first * 1000, "digest": digest}


@dataclass
class ColdRow:
    candidate: str
    status: str = "ok"
    import_ms: float = float("nan")  # median of fresh interpreters
    first_call_ms: dict[str, float] = field(default_factory=dict)  # mode → ms
    deterministic: bool = False
    installed_mb: float = 0.0


def cold(candidate: Candidate, seeds: Sequence[str] = ("0", "1", "4242")) -> ColdRow:
    """Import and first-call time in fresh interpreters, and the answers under several hash seeds."""
    from bench.language_candidates import installed_mb
    from bench.stats import median

    row = ColdRow(candidate.name)
    row.installed_mb = installed_mb(candidate.distributions)
    imports: list[float] = []
    digests: set[str] = set()
    for mode in MODES:
        firsts = []
        for seed in seeds:
            script = _PROBE.format(module=candidate.module, name=candidate.name, mode=mode)
            env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
            done = subprocess.run(
                [sys.executable, "-c", script],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                row.status = done.stderr.strip().splitlines()[-1][:80] if done.stderr else "failed"
                return row
            found = json.loads(done.stdout.strip().splitlines()[-1])
            imports.append(found["import_ms"])
            firsts.append(found["first_call_ms"])
            digests.add(f"{mode}:{found['digest']}")
        row.first_call_ms[mode] = median(firsts)
    row.import_ms = median(imports)
    row.deterministic = len(digests) == len(MODES)
    return row
