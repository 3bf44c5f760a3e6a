"""Summaries by section: windows, sources, offsets, the document summary's budget, and the CLI's --by."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
from helpers.cli import run_cli
from helpers.documents import long_document

from synopsis.config import DecodingOptions
from synopsis.document import Document, Section
from synopsis.generation import AllowedTokensProcessor, source_vocabulary_mask
from synopsis.pipeline import read_source
from synopsis.summarizers.citing import support
from synopsis.summarizers.extractive import LeadSummarizer
from synopsis.summarizers.schema import Source, SummarySentence
from synopsis.summarizers.sections import compose
from synopsis.summarizers.windows import plan_windows

PAPER = """# A Study of Things

We study *things* in depth. Things matter.

## Introduction

Summarization of long documents is hard because models read a bounded input. We propose to summarize
each section separately and compose the result.

## Empty

## Method

### Windows

Each section is cut into windows at sentence boundaries. No sentence is dropped.

A second paragraph of the windows section explains [why](https://example.org) in detail.

### Sources

Every summary sentence cites the input sentences it came from.
"""


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(capsys, *args)


def _resolve(document: Document, source: dict) -> str:
    node = document.root
    for i in source["path"]:
        node = node.children[i]
    own = [s for p in node.paragraphs for s in p]
    return own[source["sentence"]]


# ---------------------------------------------------------------------- offsets
def test_offsets_are_exact_on_markdown_and_text(tmp_path: Path) -> None:
    markdown = tmp_path / "paper.md"
    markdown.write_text(PAPER)
    document, offsets = read_source(markdown).document, read_source(markdown).offsets
    assert offsets is not None and all(o is not None for o in offsets)
    for sentence, (start, end) in zip(document.sentences, offsets, strict=True):
        piece = PAPER[start:end]
        # The slice is the sentence, whitespace aside (and the Markdown markup the reader drops).
        bare = re.sub(r"\*|\[|\]|\(https://example\.org\)", "", piece)
        assert bare.split() == sentence.text.split(), (piece, sentence.text)
    text = tmp_path / "plain.txt"
    body = "First line of one\nparagraph. Second sentence.\n\n  Another paragraph here.\n"
    text.write_text(body)
    doc, spans = read_source(text).document, read_source(text).offsets
    assert [body[a:b].split() for a, b in spans] == [s.text.split() for s in doc.sentences]


def test_offsets_span_inline_markup_the_markdown_reader_drops(tmp_path: Path) -> None:
    body = (
        "# Intro\n\nThis is a **bold** claim about [links](http://x.y) and `code`. "
        "Another one, _quietly_.\n\nPlain text *here* `too`.\n"
    )
    markdown = tmp_path / "marked.md"
    markdown.write_text(body)
    document, offsets = read_source(markdown).document, read_source(markdown).offsets
    assert offsets is not None and all(o is not None for o in offsets), offsets
    for sentence, (start, end) in zip(document.sentences, offsets, strict=True):
        bare = re.sub(r"[*_`]|\[|\]|\(http://x\.y\)", "", body[start:end])
        assert bare.split() == sentence.text.split(), (body[start:end], sentence.text)


def test_offsets_are_none_for_formats_rebuilt_by_their_reader(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(Document.from_text("One sentence. Two.").to_dict()))
    assert read_source(path).offsets is None


# ---------------------------------------------------------------------- windows
def test_windows_fit_keep_every_sentence_in_order_and_split_overlong_ones() -> None:
    document = long_document()
    document.root.children[0].paragraphs.append([" ".join(["word"] * 50)])
    document.reindex()
    windows, split = plan_windows(document, 30, lambda text: len(text.split()))
    assert split == 1
    assert all(sum(len(t.split()) for t in w.texts) <= 30 for w in windows)
    seen = []
    for window in windows:
        for source in window.sources:
            if not seen or seen[-1] != source:
                seen.append(source)
    assert [s.text for s in seen] == [s.text for s in document.sentences]
    pieces = [w for w in windows if w.sources[0].text.startswith("word word")]
    assert len(pieces) == 2 and " ".join(p.texts[0] for p in pieces).split() == ["word"] * 50
    # Paragraphs (63 words each) that fit in a window start one: windows of the first section begin at them.
    wide, _ = plan_windows(document, 200, lambda text: len(text.split()))
    starts = [w.sources[0].sentence for w in wide if w.path == (0,) and w.sources[0].sentence < 35]
    assert len(starts) >= 2 and all(start % 7 == 0 for start in starts)


def test_plain_text_is_grouped_by_paragraph_into_sections_with_null_headings() -> None:
    text = "\n\n".join(" ".join(f"Paragraph {p} says thing {i}." for i in range(20)) for p in range(6))
    document = Document.from_text(text, id="plain")
    (result,) = LeadSummarizer(1).summarize_by_section([document], max_words=1000)
    assert len(result.sections) > 1
    assert all(s.heading is None and s.path == () for s in result.sections)
    assert [s.summary[0].text for s in result.sections][0] == "Paragraph 0 says thing 0."


def test_every_section_with_text_gets_a_summary_citing_only_its_subtree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    document = long_document()
    with caplog.at_level(logging.INFO):
        (result,) = LeadSummarizer(2).summarize_by_section([document], max_words=20)
    assert "skipped 1 empty section(s)" in caplog.text
    nodes = result.walk()
    assert [n.heading for n in nodes] == ["Long", "Child"]
    for node in nodes:
        assert node.summary
        for sentence in node.summary:
            assert all(tuple(s.path[: len(node.path)]) == node.path for s in sentence.sources)
            assert sentence.support == 1.0
    assert sum(s.words for s in result.summary) <= 20
    data = json.loads(json.dumps(result.to_dict()))
    assert set(data) == {"id", "title", "note", "method", "prediction", "summary", "preface", "sections"}
    assert data["title"] == "Long"  # the document summary's heading: what the document is called
    assert data["prediction"] == "\n".join(s["text"] for s in data["summary"])
    for item in data["summary"]:
        for source in item["sources"]:
            assert _resolve(document, source) == source["text"]


def test_a_fifty_level_deep_tree_works() -> None:
    root = Section()
    node = root
    for depth in range(50):
        node = node.add(
            Section(heading=f"Level {depth + 1}", paragraphs=[[f"Text at depth {depth + 1} here."]])
        )
    document = Document(root, id="deep")
    (result,) = LeadSummarizer(1).summarize_by_section([document], max_words=500)
    nodes = result.walk()
    assert len(nodes) == 50 and nodes[-1].path == tuple([0] * 50)
    assert nodes[-1].summary[0].sources[0].text == "Text at depth 50 here."
    assert json.dumps(result.to_dict())


def test_summaries_of_many_documents_share_batches() -> None:
    calls = []

    class Counting(LeadSummarizer):
        def summarize_windows(self, windows, instructions=None, decoding=None):  # noqa: ANN001, ANN202
            calls.append({w.document for w in windows})
            return super().summarize_windows(windows, instructions)

    documents = [long_document(), Document.from_text("One short text. With two sentences.", id="b")]
    results = Counting(1).summarize_by_section(documents, batch_size=16)
    assert [r.id for r in results] == ["long", "b"]
    assert calls == [{0, 1}]


def test_sections_stream_as_they_finish_at_the_default_batch_size() -> None:
    """Issue 61, item 3: 8 section summaries came together after one batch of their 12 windows; with a
    listener, calls grow from the first section's windows, so its summary is out before the last call."""
    from synopsis.summarizers.windows import plan_windows

    events: list[tuple[str, object]] = []

    class Slow(LeadSummarizer):  # a model whose every call takes a while: only the order is looked at
        def input_capacity(self) -> int:
            return 12

        def summarize_windows(self, windows, instructions=None, decoding=None):  # noqa: ANN001, ANN202
            events.append(("call", len(windows)))
            return super().summarize_windows(windows, instructions)

    root = Section()
    for s in range(8):
        sentences = [f"Section {s} sentence {i} says a thing." for i in range(2 - s % 2)]
        root.add(Section(heading=f"Part {s}", paragraphs=[[x] for x in sentences]))
    document = Document(root, id="paper")
    summarizer = Slow(1)
    windows, _ = plan_windows(document, 12, summarizer.input_length)
    assert len(windows) == 12 < 16  # one batch of the default size
    (streamed,) = summarizer.summarize_by_section(
        [document], on_section=lambda d, section: events.append(("section", section.heading))
    )
    calls = [i for i, (kind, _) in enumerate(events) if kind == "call"]
    first_section = events.index(("section", "Part 0"))
    assert first_section < calls[-1]  # before the last batch is decoded
    assert events[: first_section] == [("call", 2)]  # after a call of its own two windows
    assert [n for kind, n in events if kind == "call"] == [2, 4, 6]  # then growing to the batch size
    assert [e for e in events if e[0] == "section"] == [("section", f"Part {s}") for s in range(8)]
    events.clear()
    (whole,) = summarizer.summarize_by_section([document])  # nobody listens: full batches
    assert events == [("call", 12)] and whole.to_dict() == streamed.to_dict()
    from synopsis.summarizers.batches import window_batches

    assert window_batches(windows, 1, streaming=True) == [(i, i + 1) for i in range(12)]
    assert window_batches(windows, 3, streaming=True) == [(0, 2), (2, 5), (5, 8), (8, 11), (11, 12)]


# ---------------------------------------------------------------------- support and the budget
def test_support_counts_content_words_found_in_the_cited_sentences() -> None:
    cited = [Source((0,), 0, "The river flooded the valley.")]
    assert support("The valley flooded.", cited) == 1.0
    assert support("The valley burned badly.", cited) == pytest.approx(1 / 3)
    assert support("It was the.", cited) is None


def test_compose_never_exceeds_the_budget_and_drops_rather_than_cuts() -> None:
    document = long_document()
    sentences = [
        SummarySentence(s.text, [Source((0,), i, s.text)], 1.0) for i, s in enumerate(document.sentences)
    ]
    for method in ("coverage", "round-robin"):
        for budget in (1, 8, 9, 17, 60):
            chosen = compose(sentences, document, budget, method)
            assert sum(s.words for s in chosen) <= budget
            assert all(s in sentences for s in chosen)
            assert chosen == sorted(chosen, key=sentences.index)
    assert compose(sentences, document, 4, "coverage") == []  # every sentence has 5 words or more


# ---------------------------------------------------------------------- the source-restricting processor
def test_allowed_tokens_processor_bans_other_tokens_per_document_across_beams() -> None:
    free = torch.tensor([False, False, True, False, False, False])  # id 2: EOS
    allowed = source_vocabulary_mask([[3], [4, 5]], free, 7)
    processor = AllowedTokensProcessor(allowed)
    log_probs = torch.zeros(4, 7)  # 2 documents x 2 beams
    out = processor(torch.zeros(4, 0, dtype=torch.long), log_probs)
    finite = [torch.isfinite(row).nonzero().flatten().tolist() for row in out]
    assert finite == [[2, 3], [2, 3], [2, 4, 5], [2, 4, 5]]
    assert torch.equal(log_probs, torch.zeros(4, 7))


# ---------------------------------------------------------------------- the bundled model and the CLI
def test_pointer_generator_by_section_cites_its_window_with_full_support(tmp_path: Path) -> None:
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    summarizer = PointerGeneratorSummarizer.from_pretrained()
    markdown = tmp_path / "paper.md"
    markdown.write_text(PAPER)
    parsed = read_source(markdown)
    (result,) = summarizer.summarize_by_section([parsed.document], offsets=[parsed.offsets])
    assert [n.heading for n in result.walk()] == [
        "A Study of Things",
        "Introduction",
        "Method",
        "Windows",
        "Sources",
    ]
    for node in result.walk():
        for sentence in node.summary:
            assert sentence.sources
            assert all(s.path[: len(node.path)] == node.path for s in sentence.sources)
            assert all(PAPER[s.start : s.end].split()[0] == s.text.split()[0] for s in sentence.sources)
            # Content words come only from the window; every one is found in a cited sentence.
            assert sentence.support == 1.0
    # Far from its training data (a meeting), the model left free writes words of its prior.
    meeting = Document.from_text(
        "Grad A: Yeah, so um, I think we should, uh, start with the digits. Professor B: OK. Right. Yeah. "
        "Grad A: And then the, um, the thing about the recording, it's, you know, it's on. "
        "Professor B: Mm-hmm. So we do that.",
        id="m",
    )
    (kept,) = summarizer.summarize_by_section([meeting])
    summarizer.restrict_to_source = False
    (free,) = summarizer.summarize_by_section([meeting])
    assert all(s.support == 1.0 for s in kept.summary)
    assert min(s.support for s in free.summary) < 0.5


def test_cli_by_section_json_and_outline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    markdown = tmp_path / "paper.md"
    markdown.write_text(PAPER)
    code, out, err = _run(
        ["summarize", str(markdown), "--by", "section", "--method", "lead-1", "--output-format", "json"],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["id"] == str(markdown)
    # sections[i] is the section at path (i,): skipped ones keep their place; the root's text is the preface
    assert data["preface"]["heading"] == "A Study of Things" and data["preface"]["path"] == []
    assert [(s["heading"], s["skipped"]) for s in data["sections"]] == [
        ("Introduction", False),
        ("Empty", True),
        ("Method", False),
    ]
    for item in data["summary"]:
        for source in item["sources"]:
            assert PAPER[source["start"] : source["end"]].split()[0] == source["text"].split()[0]
    code, out, _ = _run(["summarize", str(markdown), "--by", "section", "--method", "lead-1"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert "# Introduction" in lines and "## Windows" in lines and "## Sources" in lines
    assert lines.index("# Method") < lines.index("## Windows") < lines.index("## Sources")
    assert any(line.startswith('== summary of "A Study of Things" (') for line in lines)


def test_cli_auto_goes_by_section_for_a_long_document_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # a long document with headings; the default reads a long text without headings whole (next test)
    path = tmp_path / "long.md"
    body = " ".join(["Rivers flooded the valley after rain."] * 12)
    path.write_text("\n\n".join(f"## Part {i}\n\n{body}" for i in range(6)))
    with caplog.at_level(logging.INFO):
        code, out, err = _run(["summarize", str(path), "--output-format", "json"], capsys)
    assert code == 0, err
    assert sum("summarizing by section" in r.getMessage() for r in caplog.records) == 1
    assert len(json.loads(out)["sections"]) >= 2


def test_the_default_reads_a_long_article_without_headings_whole_and_fills_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 57 item 3: a news-like article (no headings, far from paper abstracts) gets the document's own
    sentences chosen over the whole text, by document, as many whole sentences as --max-words holds."""
    sentences = [
        f"The {n} council meeting approved a plan to rebuild the bridge over the river by next summer."
        for n in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
    ] * 3
    path = tmp_path / "article.txt"
    later = " ".join(f"Residents said {s[4:]}" for s in sentences[9:])
    path.write_text(" ".join(sentences[:9]) + "\n\n" + later)
    code, out, err = _run(["summarize", str(path), "--max-words", "60", "--output-format", "json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["sections"] == []  # by document
    words = [len(s["text"].split()) for s in result["summary"]]
    assert sum(words) <= 60 and sum(words) + min(words) > 60  # full: no other sentence would fit


def test_cli_corpus_by_section_writes_the_schema_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synopsis.data.example import Example, write_examples

    corpus = tmp_path / "c.jsonl"
    write_examples(
        [Example("a", long_document(), ["x"]), Example("b", Document.from_text("A b c."), ["y"])], corpus
    )
    out_path = tmp_path / "p.jsonl"
    code, _, err = _run(
        [
            "summarize",
            str(corpus),
            "--corpus",
            "synopsis",
            "--by",
            "section",
            "--method",
            "lead-1",
            "-o",
            str(out_path),
        ],
        capsys,
    )
    assert code == 0, err
    records = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [r["id"] for r in records] == ["a", "b"]
    assert all(set(r) >= {"id", "prediction", "summary", "sections"} for r in records)
    assert all(s["start"] is None for r in records for x in r["summary"] for s in x["sources"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--by", "section", "--method", "oracle"], "--method oracle needs a reference per document"),
        (["--by", "chapter"], "--by must be one of auto, document, section"),
        (["--by", "section", "--outline"], "--outline shows a generated question-summary hierarchy"),
        (["--output-format", "yaml"], "--output-format must be one of"),
    ],
)
def test_nonsense_by_section_options_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    path = tmp_path / "doc.txt"
    path.write_text("One sentence here.")
    code, out, err = _run(["summarize", str(path), *args], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


# ---------------------------------------------------------------------- every method by section
def test_seq2seq_checkpoint_by_section_windows_fit_its_input_and_share_batches(
    tmp_path: Path, shared_data: Path
) -> None:
    from helpers.tiny_models import save_tiny_bart

    from synopsis.summarizers import load_summarizer

    model_dir = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    summarizer = load_summarizer(model=model_dir, max_source_length=40)
    capacity = summarizer.input_capacity()
    assert capacity == 40 - summarizer.SPECIAL_TOKEN_ROOM
    calls: list[list[int]] = []
    original = summarizer.summarize

    def counting(documents, instructions=None, references=None, **options):  # noqa: ANN001, ANN003, ANN202
        calls.append([summarizer.input_length(" ".join(s.text for s in d.sentences)) for d in documents])
        return original(documents, instructions, references, **options)

    summarizer.summarize = counting
    documents = [long_document(), Document.from_text("A short text about rivers. It floods.", id="b")]
    decoding = DecodingOptions(max_length=12, num_beams=1)
    results = summarizer.summarize_by_section(documents, batch_size=64, decoding=decoding)
    assert len(calls) == 1  # every window of both documents in one batch
    assert all(0 < n <= capacity for n in calls[0])
    assert [r.id for r in results] == ["long", "b"]
    for node in results[0].walk():
        for sentence in node.summary:
            assert all(s.path[: len(node.path)] == node.path for s in sentence.sources)


def test_centrality_by_section_picks_within_each_section() -> None:
    import numpy as np

    from synopsis.summarizers.extractive import CentralitySummarizer

    class Encoder:  # a deterministic stand-in for the embedding model: one-hot by sentence number
        def encode(self, texts: list[str]) -> np.ndarray:
            out = np.zeros((len(texts), 64), dtype=np.float32)
            for i, text in enumerate(texts):
                out[i, hash(text) % 64] = 1.0
            return out

    (result,) = CentralitySummarizer(k=1, encoder=Encoder()).summarize_by_section([long_document()])
    for node in result.walk():
        assert len(node.summary) == 1 and node.summary[0].sources[0].path == node.path


def test_cli_corpus_by_section_resumes_to_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synopsis.data.example import Example, write_examples

    corpus = tmp_path / "c.jsonl"
    texts = [f"Document {i} talks about rivers. It has two sentences about floods." for i in range(3)]
    write_examples([Example(str(i), Document.from_text(t), ["x"]) for i, t in enumerate(texts)], corpus)
    args = ["summarize", str(corpus), "--corpus", "synopsis", "--by", "section", "--method", "lead-1"]
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    assert _run([*args, "-o", str(whole)], capsys)[0] == 0
    part.write_bytes(
        whole.read_bytes().split(b"\n", 1)[0] + b"\n" + b'{"id": "1", "predic'
    )  # killed mid-line
    code, _, err = _run([*args, "-o", str(part), "--resume"], capsys)
    assert code == 0, err
    assert part.read_bytes() == whole.read_bytes()


def test_cli_by_document_json_has_the_same_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "doc.txt"
    path.write_text("Rivers flooded the valley. Three bridges were closed.\n\nOfficials expect a reopening.")
    code, out, err = _run(
        ["summarize", str(path), "--by", "document", "--method", "lead-2", "--output-format", "json"], capsys
    )
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"id", "title", "note", "method", "prediction", "summary", "preface", "sections"}
    assert data["title"] is None  # by document: no heading over the summary
    assert data["sections"] == [] and data["preface"] is None
    first = ["Rivers flooded the valley.", "Three bridges were closed."]
    assert [s["text"] for s in data["summary"]] == first
    assert [[x["text"] for x in s["sources"]] for s in data["summary"]] == [
        ["Rivers flooded the valley."],
        ["Three bridges were closed."],
    ]


def test_subtree_windows_fit_with_headings_and_keep_each_sentence_in_its_section() -> None:
    from synopsis.summarizers.windows import window_document

    document = long_document()
    length = lambda text: len(text.split())  # noqa: E731
    windows, _ = plan_windows(document, 30, length, subtrees=True)
    long_section, child = document.sections[1], document.sections[2]
    for node in (long_section, child):  # each section's windows cover its whole subtree, in order
        texts = [t for w in windows if w.section is node for t in w.texts]
        inside = [s.text for s in document.sentences if node.index <= s.section.index < node.subtree_end]
        assert texts == inside
    spanning = [w for w in windows if w.section is long_section and any(n is child for n in w.nodes)]
    assert spanning and all(w.subtree for w in windows if w.section is long_section)
    for window in [w for w in windows if w.subtree]:
        sub = window_document(window)
        assert (
            sum(length(s.text) for s in sub.sentences)
            + sum(length(n.heading or "") + 1 for n in sub.sections)
            <= 30
        )
        assert [s.text for s in sub.sentences] == window.texts
        assert [s.section.heading for s in sub.sentences] == [n.heading for n in window.nodes]
    (last,) = spanning[-1:]
    sub = window_document(last)
    assert [n.heading for n in sub.sections] == ["Long", "Child"] and sub.sections[1].parent is sub.root


def test_content_words_keep_hyphenated_and_underscored_words_drop_function_words_and_punctuation() -> None:
    from synopsis.text import content_words

    text = "The state-of-the-art model's 3 results, _ and __x: ok!"
    assert content_words(text) == ["state-of-the-art", "model's", "3", "results", "__x", "ok"]
