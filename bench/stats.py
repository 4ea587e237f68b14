"""Small statistics for benchmark samples: medians and nearest-rank percentiles."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else math.nan


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0–100): a value that was actually observed."""
    data = sorted(values)
    if not data:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(data)))
    return data[min(rank, len(data)) - 1]


def p95(values: Iterable[float]) -> float:
    return percentile(values, 95)


def mean(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.fmean(data) if data else math.nan


def spread(values: Sequence[float]) -> str:
    """min–max as text, for deterministic counts that may still vary by turn."""
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"
