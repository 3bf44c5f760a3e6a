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


def test_one_method_table_feeds_help_errors_and_loading(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a chain of string comparisons, a regex in the CLI and a --help that missed two methods."""
    from synopsis.cli import load_command
    from synopsis.errors import SynopsisError
    from synopsis.summarizers import METHOD_TABLE, METHODS, find_method

    command = load_command("summarize")
    (method_help,) = [p.help for p in command.params if "--method" in getattr(p, "opts", [])]
    assert all(m.description in method_help for m in METHOD_TABLE)
    assert all(f"{m.name}: " in method_help for m in METHOD_TABLE if m.name != "default")
    with pytest.raises(SynopsisError) as unknown:
        load_summarizer("lead3")
    assert str(unknown.value).endswith(", ".join(METHODS))
    assert (
        find_method("lead-7")[1].group(1) == "7" and load_summarizer("lead-7").describe().method == "lead-7"
    )
