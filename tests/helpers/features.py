"""A toy input feature for the tests of the feature table (tests/test_input_features.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from synopsis.models.features import InputFeatures


class ToyInputs(InputFeatures):
    """A marker before every sentence and section, section ids shifted by 100, and a field of its own."""

    sentence_marker = "[S]"

    def section_marker(self, section: Any) -> str | None:
        return f"[D{section.depth}]" if section.depth else None

    def section_ids(self, sections: np.ndarray, segments: np.ndarray, input_ids: np.ndarray) -> np.ndarray:
        return np.where(sections >= 0, sections + 100, sections)

    def collate(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> None:
        batch["toy_lengths"] = torch.tensor([len(s) for s in sources])
