"""Request and response bodies of the JSON API (version 1); FastAPI derives the OpenAPI schema from them.

Requests refuse unknown fields, so a misspelt option is a 422 naming it instead of being silently ignored.
Bounds here are the hard, per-field ones; limits an operator may change (instruction count, body size)
live in :class:`~synopsis.serve.settings.ServeSettings` and are checked by the handlers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from synopsis.config import DECODING_OPTIONS
from synopsis.summarizers.decoders import BACKENDS, COMPUTE_TYPES

DocumentFormat = Literal["auto", "text", "markdown", "rst", "json"]


class _Strict(BaseModel):
    # strict: a number is a number (``"4"`` and ``true`` are not 4), so a client's type error is a 422
    model_config = ConfigDict(extra="forbid", strict=True)


def _encodable(text: str) -> str:
    """Refuse lone surrogates (JSON's ``"\\ud800"``): no UTF-8 text holds them, so neither could a
    response, a log line or a summary that repeats them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        raise ValueError(f"holds a lone surrogate (U+{code:04X}) at character {err.start}") from None
    return text


#: A request string: UTF-8-encodable text.
Text = Annotated[str, AfterValidator(_encodable)]
#: The longest instruction, and prediction or reference of an evaluation, whatever the settings: every string
#: of a request has a bound (a document and a source have the body's, ``--max-body-mb``, and the words').
MAX_INSTRUCTION_CHARS = 10_000
MAX_SUMMARY_CHARS = 100_000
Summary = Annotated[Text, Field(max_length=MAX_SUMMARY_CHARS)]


def _decoding_field(name: str) -> Any:
    """A request field for the decoding option ``name`` (:data:`synopsis.config.DECODING_OPTIONS`), described
    by its help text. Its per-request bounds are in the OpenAPI schema; they are checked where the request's
    :class:`~synopsis.config.DecodingOptions` is built (``from_mapping(request=True)``), so a bad value gets
    the one message the CLI and the library give."""
    option = DECODING_OPTIONS[name]
    bounds = option.request_range
    return Field(
        None, description=option.help, json_schema_extra={"minimum": bounds.low, "maximum": bounds.high}
    )


class SummarizeOptions(_Strict):
    """Per-request decoding options; each model accepts a subset (``GET /v1/models`` lists it)."""

    # The decoding options: names, bounds and help from their one definition, shared with the CLI's flags.
    num_beams: int | None = _decoding_field("num_beams")
    min_length: int | None = _decoding_field("min_length")
    max_length: int | None = _decoding_field("max_length")
    length_penalty: float | None = _decoding_field("length_penalty")
    no_repeat_ngram_size: int | None = _decoding_field("no_repeat_ngram_size")
    k: int | None = Field(None, ge=1, le=100, description="Sentences to extract (centrality).")
    # What decodes the model (synopsis serve --backend / --compute-type unless given here): the same checks
    # and one-line refusals as the CLI's flags.
    backend: Literal[BACKENDS] | None = Field(  # type: ignore[valid-type]
        None,
        description="torch (generate()), ctranslate2 (a stock Hugging Face checkpoint converted once; the "
        "same summaries in float32, faster on a CPU) or auto (CTranslate2 where it writes generate()'s "
        "tokens for the request's options, else torch). Default: the server's --backend (auto unless it "
        "says). A model CTranslate2 cannot run (a method on it, another family, not a Hugging Face "
        "checkpoint) is a 422 when ctranslate2 is asked for.",
    )
    compute_type: Literal[COMPUTE_TYPES] | None = Field(  # type: ignore[valid-type]
        None,
        description="backend ctranslate2: float32 (the same tokens as torch), int8 or int8_float32. Default: "
        "the server's --compute-type on its backend, else float32.",
    )

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class SummarizeBody(_Strict):
    # POST /v1/summarize's JSON body, checked at the edge; the runner's typed request built from it is
    # synopsis.pipeline.SummarizeRequest. (No docstring: it would become the schema's OpenAPI description.)
    # Its published name in /openapi.json (and in the clients generated from it) stays "SummarizeRequest":
    # pydantic names a schema by the class's __qualname__ and titles it by the config's title.
    __qualname__ = "SummarizeRequest"
    model_config = ConfigDict(title="SummarizeRequest")

    document: Text = Field(
        ...,
        min_length=1,
        description="The document's text (plain text, Markdown, reStructuredText or Document JSON).",
    )
    format: DocumentFormat = Field(
        "auto", description="auto: JSON object, Markdown if it has headings, else text."
    )
    model: Text = Field("default", max_length=64, description="A model name from GET /v1/models.")
    instructions: list[Annotated[Text, Field(max_length=MAX_INSTRUCTION_CHARS)]] | None = Field(
        None, description="One summary per instruction, in order; none or null: one plain summary."
    )
    options: SummarizeOptions | None = None
    stream: bool = Field(
        False,
        description="Answer NDJSON (application/x-ndjson): a 'parsed' event, one 'summary' event per summary "
        "as it finishes (by section: a 'section' event per section summary as it finishes, before its "
        "'summary'), then 'done' with the whole response (or 'error').",
    )
    by: Literal["auto", "document", "section"] = Field(
        "auto",
        description="document: one summary of what the model reads; section: a summary of every section and "
        "a document summary within max_words, every sentence with its sources (in 'structured'); auto: by "
        "section when the document is longer than the model's input.",
    )
    max_words: int = Field(
        150, ge=1, le=10_000, description="By section: longest document summary, in words."
    )


class SourceSentence(BaseModel):
    path: list[int] = Field(..., description="Section path from the root: sections[i].sections[j]...")
    sentence: int | None = Field(
        ...,
        description="Position among that section's own sentences; null for a list item a lead-in brings.",
    )
    text: str
    start: int | None = Field(None, description="Character offset in the submitted text (text, Markdown).")
    end: int | None = None


class SummarySentenceItem(BaseModel):
    text: str
    sources: list[SourceSentence]
    support: float | None = Field(None, description="Share of its content words found in its sources.")


class SectionSummaryItem(BaseModel):
    heading: str | None
    path: list[int]
    index: int | None = Field(None, description="Position in a pre-order walk of the section tree (root: 0).")
    skipped: bool = Field(
        False,
        description="Nothing to show in its subtree (no text, or no sentence its summaries took): kept in "
        "place with an empty summary.",
    )
    summary: list[SummarySentenceItem]
    sections: list[SectionSummaryItem] = []


class StructuredSummary(BaseModel):
    """The schema of ``synopsis summarize --output-format json``: ``sections[i].sections[j]`` is the
    section at path ``(i, j)``; the root's own text is ``preface``; by document ``sections`` is empty."""

    id: str | None
    title: str | None = Field(
        None,
        description="By section: what the document is called (its title, else its top-level headings when "
        "it opens with one), the document summary's heading; not one of its sentences.",
    )
    note: str | None = Field(
        None, description="One line to show with the summary (e.g. why it is extractive), or null."
    )
    method: str | None = Field(
        None,
        description="The method that wrote this summary (the default names the one it chose for the "
        "document: 'pointer-generator' or 'salient').",
    )
    prediction: str
    summary: list[SummarySentenceItem]
    preface: SectionSummaryItem | None = None
    sections: list[SectionSummaryItem]


class SummaryItem(BaseModel):
    instruction: str | None
    summary: str
    by: Literal["document", "section"] | None = Field(None, description="'section' for a summary by section.")
    structured: StructuredSummary | None = Field(
        None, description="Every summary sentence's sources and support; by section, every section's summary."
    )


class SectionOutline(BaseModel):
    heading: str | None
    number: str | None = None
    depth: int
    sentences: int = Field(..., description="Sentences directly in this section.")
    total_sentences: int = Field(..., description="Sentences in this section and its subsections.")
    children: list[SectionOutline] = []


class DocumentStats(BaseModel):
    format: str = Field(..., description="The format the document was read as.")
    title: str | None
    sections: int
    sentences: int
    words: int


class Timing(BaseModel):
    queue: float = Field(..., description="Waiting for an inference thread.")
    parse: float
    summaries: list[float] = Field(
        ..., description="One per summary, in order (each instruction timed alone)."
    )
    total: float = Field(..., description="From the request's arrival to the response.")


class SummarizeResponse(BaseModel):
    model: str
    backend: str | None = Field(
        None, description="What decoded the summaries: torch (generate()) or ctranslate2; null: no model."
    )
    summaries: list[SummaryItem]
    sections: SectionOutline = Field(..., description="Outline of the parsed document; the root is depth 0.")
    document: DocumentStats
    outline: Any | None = Field(
        None,
        description="A summary that is a question-summary hierarchy, parsed: tree, outline text, problems.",
    )
    timing_ms: Timing
    warnings: list[str] = []


class OutlineRequest(_Strict):
    document: Text = Field(..., min_length=1)
    format: DocumentFormat = "auto"


class OutlineResponse(BaseModel):
    sections: SectionOutline
    document: DocumentStats


class EvaluateRequest(_Strict):
    predictions: list[Summary] = Field(..., min_length=1)
    references: list[Summary | list[Summary]] = Field(
        ..., min_length=1, description="Per prediction: one reference, or a list of references."
    )
    sources: list[Text] | None = Field(
        None, min_length=1, description="Source documents, for novel n-gram rates."
    )
    metrics: list[Literal["rouge", "bleu", "meteor", "novel", "repeat", "length"]] = [
        "rouge",
        "bleu",
        "meteor",
        "novel",
        "repeat",
        "length",
    ]
    mode: Literal["rouge-score", "perl"] = "rouge-score"
    aggregate: Literal["max", "mean"] = "max"
    use_stemmer: bool = True
    sentences: Literal["auto", "newline", "punkt"] = "auto"  # as `synopsis evaluate --sentences`
    wordnet_exceptions: bool = False
    bootstrap: int = Field(1000, ge=0, le=10_000)
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the bootstrap's resampling.")


class ModelInfo(BaseModel):
    name: str
    method: str
    description: str
    instructions: bool = Field(..., description="Whether the model uses instructions (others ignore them).")
    options: list[str]
    source: Literal["builtin", "user"]
    device: str | None = Field(None, description="Where its model computes (cpu, cuda:0); null: no model.")
    dtype: str | None = Field(None, description="Its weights' precision (float32, bfloat16); null: no model.")
    backend: str | None = Field(
        None,
        description="What decodes it (--backend): torch (generate()), ctranslate2, or auto (one of them per "
        "set of options; each answer's backend says which), unless a request asks for another in "
        "options.backend; null: no model.",
    )


class ModelsResponse(BaseModel):
    default: str | None
    models: list[ModelInfo]


class HealthResponse(BaseModel):
    status: Literal["ok"]
    version: str
    models: int
    device: str = Field(
        ..., description="Where the models compute (synopsis serve --device): cpu, cuda:0, ..."
    )
    pool: dict[str, int]
    compute: dict[str, int] = Field(
        ...,
        description="torch's intra-op threads per computation (synopsis serve --threads) and the batches of "
        "one model that may run at once (--batch-workers; 0: batching off)",
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None
    details: list[dict[str, Any]] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody
