"""Toy input features for the tests of the feature table and list (tests/test_input_features.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from synopsis.models.features import InputFields, TextMarkers, pad_rows


class ToyInputs(TextMarkers, InputFields):
    """A marker before every sentence and section, section ids of its own (the document's shifted by 100)
    on each source and in the batch, and a batch field of its own."""

    sentence_marker = "[S]"

    def section_marker(self, section: Any) -> str | None:
        return f"[D{section.depth}]" if section.depth else None

    def source_fields(self, document: Any, source: Any) -> dict[str, Any]:
        return {"toy_section_ids": [s + 100 if s >= 0 else s for s in source.document_section_ids]}

    def batch_fields(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> dict:
        width = batch["input_ids"].shape[1]
        return {
            "toy_section_ids": pad_rows((s.toy_section_ids for s in sources), width, -1),
            "toy_lengths": torch.tensor([len(s) for s in sources]),
        }


class CountingInputs(InputFields):
    """A second field feature: it reads the field the toy feature (before it in the list) added."""

    def source_fields(self, document: Any, source: Any) -> dict[str, Any]:
        return {"toy_sections_seen": len({s for s in source.toy_section_ids if s >= 0})}

    def batch_fields(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> dict:
        return {"toy_sections_seen": torch.tensor([s.toy_sections_seen for s in sources])}
