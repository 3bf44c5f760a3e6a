"""The library's summarizer contract as a user meets it."""

from __future__ import annotations

import pytest

from synopsis.document import Document
from synopsis.summarizers import load_summarizer

TEXT = (
    "Rivers flooded the valley after rain.\n\nThree bridges were closed. Officials expect a reopening soon."
)


@pytest.mark.parametrize("method", ["lead-3", "centrality", "salient"])
def test_plain_strings_are_documents(method: str) -> None:
    """Before: ``AttributeError: 'str' object has no attribute 'sentences'``."""
    if method == "centrality":
        pytest.importorskip("sentence_transformers")
    summarizer = load_summarizer(method=method)
    if method == "lead-3":
        assert summarizer.summarize(["Some text."]) == ["Some text."]
    as_text = summarizer.summarize([TEXT])
    assert as_text == summarizer.summarize([Document.from_text(TEXT)]) and as_text[0]
    (by_section,) = summarizer.summarize_by_section([TEXT])
    assert by_section.to_dict() == summarizer.summarize_by_section([Document.from_text(TEXT)])[0].to_dict()
