"""Small statistics for the report: medians, p95 (nearest rank) and ratios."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Summary:
    n: int
    median: float
    p95: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        if not samples:
            return cls(0, math.nan, math.nan)
        ordered = sorted(samples)
        rank = max(0, math.ceil(0.95 * len(ordered)) - 1)
        return cls(len(ordered), statistics.median(ordered), ordered[rank])


def ratio(value: float, floor: float) -> float:
    return value / floor if floor and not math.isnan(floor) else math.nan


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.2f}"


def times(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}x"
