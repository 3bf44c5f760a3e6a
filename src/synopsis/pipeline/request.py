"""What a summarize request asks, typed once at the edge (the CLI's flags, the service's body): its items
(:class:`RequestItem`, one per document and instruction), ``by`` (decided per document when ``auto``:
:func:`decide_by_section`), ``max_words`` and one :class:`~synopsis.config.DecodingOptions`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.pipeline.reading import ParsedDocument
from synopsis.summarizers.sections import DEFAULT_MAX_WORDS, SectionReader, longer_than_input

#: What ``by`` may be, everywhere; ``auto`` (the default of the CLI and the service): by section when the
#: document is longer than one model call reads.
BY = ("auto", "document", "section")
DEFAULT_BY = "auto"

log = logging.getLogger(__name__)


def check_by(by: str) -> str:
    if by not in BY:
        raise InputError(f"by must be one of {', '.join(BY)}, got '{by}'")
    return by


def decide_by_section(by: str, summarizer: SectionReader, document: Document) -> bool:
    """Whether to summarize ``document`` by section (the one place ``auto`` is decided): ``auto`` when the
    summarizer can and the document is longer than one model call reads (said in one log line)."""
    if check_by(by) != "auto":
        return by == "section"
    if summarizer.needs_references:
        return False
    length = longer_than_input(summarizer, document)
    if length is None:
        return False
    capacity = summarizer.input_capacity_for(document)
    # words as the note and the API's document.words count them; tokens as the model reads them
    log.info(
        "%s: %s words (%s tokens), longer than the model's input (%s tokens): summarizing by section (by "
        "document: one summary of the first %s tokens)",
        document.id or "the document",
        f"{document.num_words():,}",
        f"{length:,}",
        f"{capacity:,}",
        f"{capacity:,}",
    )
    return True


@dataclass(frozen=True)
class RequestItem:
    """One summary a request asks for: a document as read (:class:`ParsedDocument`), named ``id``, with one
    instruction (``None``: a plain summary) and its reference summaries (the oracle reads them)."""

    id: str | None
    parsed: ParsedDocument
    instruction: str | None = None
    references: Sequence[str] | None = None


@dataclass(frozen=True)
class SummarizeRequest:
    """What ``synopsis summarize`` and ``POST /v1/summarize`` ask, typed once at the edge: the items (one
    per document and instruction, in output order), ``by`` (decided per document when ``auto``),
    ``max_words``, one :class:`~synopsis.config.DecodingOptions` (checked when it was built) and the
    output's form (the CLI's writers read it; the runner does not)."""

    items: Sequence[RequestItem]
    by: str = DEFAULT_BY
    max_words: int = DEFAULT_MAX_WORDS
    decoding: DecodingOptions = NO_DECODING
    output_format: str = "text"

    def __post_init__(self) -> None:
        check_by(self.by)
        if self.max_words < 1:
            raise InputError(f"max_words must be >= 1, got {self.max_words}")


def document_items(
    parsed: ParsedDocument, instructions: Sequence[str | None] = (), name: str | None = None
) -> list[RequestItem]:
    """One document's items, one per instruction (one plain summary without any), in order, named ``name``
    (default: the document's id), ``name | instruction`` when there are several."""
    wanted: list[str | None] = list(instructions) or [None]
    name = parsed.document.id if name is None else name
    several = len(wanted) > 1 and name is not None
    return [RequestItem(f"{name} | {i}" if several else name, parsed, i) for i in wanted]
