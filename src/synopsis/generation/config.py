"""Decoding settings shared by trainers (which store defaults with a model) and summarizers."""

from __future__ import annotations

from dataclasses import dataclass

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

    def __post_init__(self) -> None:
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
        if self.max_length < 1 or self.min_length < 0 or self.min_length > self.max_length:
            raise ValueError(
                f"need 0 <= min_length <= max_length, got {self.min_length} and {self.max_length}"
            )
        if self.length_penalty_kind not in LENGTH_PENALTIES:
            kinds = ", ".join(LENGTH_PENALTIES)
            raise ValueError(f"length_penalty_kind must be one of {kinds}, got {self.length_penalty_kind!r}")
        if self.no_repeat_ngram_size < 0:
            raise ValueError(f"no_repeat_ngram_size must be >= 0, got {self.no_repeat_ngram_size}")
        if self.max_source_tokens < 1:
            raise ValueError(f"max_source_tokens must be >= 1, got {self.max_source_tokens}")
