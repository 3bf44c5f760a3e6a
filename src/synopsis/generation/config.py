"""Decoding settings shared by trainers (which store defaults with a model) and summarizers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from synopsis.config import AT_LEAST_ONE, FINITE, NON_NEGATIVE, Range, check_ranges
from synopsis.generation.penalties import LENGTH_PENALTIES

GENERATION_CONFIG_FILE = "generation_config.json"


@dataclass
class GenerationConfig:
    """Decoding settings; a model directory may carry its own defaults in ``generation_config.json``."""

    num_beams: int = 4
    min_length: int = 35
    max_length: int = 120
    length_penalty: float = 1.0  # the exponent alpha of the length penalty
    length_penalty_kind: str = "average"  # "average" (length ** alpha) or "wu" (((5 + length) / 6) ** alpha)
    no_repeat_ngram_size: int = 0  # logits processor: ban repeated n-grams (0: off)
    no_immediate_repeat: bool = False  # logits processor: ban the token just generated
    max_source_tokens: int = 400

    RANGES: ClassVar[dict[str, Range]] = {
        "num_beams": AT_LEAST_ONE,
        "min_length": NON_NEGATIVE,
        "max_length": AT_LEAST_ONE,
        "length_penalty": FINITE,
        "no_repeat_ngram_size": NON_NEGATIVE,
        "max_source_tokens": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_ranges(self, self.RANGES)
        if self.min_length > self.max_length:
            raise ValueError(f"min_length ({self.min_length}) must be <= max_length ({self.max_length})")
        if self.length_penalty_kind not in LENGTH_PENALTIES:
            kinds = ", ".join(LENGTH_PENALTIES)
            raise ValueError(f"length_penalty_kind must be one of {kinds}, got {self.length_penalty_kind!r}")
