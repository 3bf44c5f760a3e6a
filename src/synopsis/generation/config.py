"""The pointer-generator's decoding settings: the caller's :class:`~synopsis.config.DecodingOptions` on top of
the defaults a trainer stores with a model, plus the settings only this decoder has."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

from synopsis.config import AT_LEAST_ONE, DECODING_OPTIONS, DecodingOptions, Range, check_ranges
from synopsis.errors import ConfigError
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

    # The options a caller may set keep the ranges of their one definition (synopsis.config.DECODING_OPTIONS).
    RANGES: ClassVar[dict[str, Range]] = {
        **{name: option.allowed for name, option in DECODING_OPTIONS.items()},
        "max_source_tokens": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_ranges(self, self.RANGES)
        if self.min_length > self.max_length:
            raise ValueError(f"min_length ({self.min_length}) must be <= max_length ({self.max_length})")
        if self.length_penalty_kind not in LENGTH_PENALTIES:
            kinds = ", ".join(LENGTH_PENALTIES)
            raise ValueError(f"length_penalty_kind must be one of {kinds}, got {self.length_penalty_kind!r}")

    def with_options(self, options: DecodingOptions) -> GenerationConfig:
        """These settings with the caller's options on top: the options come checked, so only
        ``min_length <= max_length`` is, against the defaults kept (the one pair neither held alone)."""
        out = copy.copy(self)
        for name, value in options.given().items():
            setattr(out, name, value)
        if out.min_length > out.max_length:
            raise ConfigError(
                f"generation options: min_length ({out.min_length}) must be <= max_length ({out.max_length})"
            )
        return out
