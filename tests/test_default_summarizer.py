"""Issue 38 items 1 and 2: the default summarizer (the bundled model in its domain, salient sentences with a
note elsewhere), the salient method, and the domain check's vocabulary floor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from synopsis.cli import main
from synopsis.data.pointer_generator import document_words, known_word_rate, known_word_rate_floor
from synopsis.document import Document, Paragraph, Section
from synopsis.pipeline import read_source
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.default import DefaultSummarizer
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer
from synopsis.summarizers.salient import (
    SalientSummarizer,
    TfidfVectors,
    all_sources,
    budgeted_mmr,
    directed_centrality,
    inline_code,
    is_informative,
    lead_in_units,
    mmr,
    stands_alone,
    title_names,
)
from synopsis.summarizers.sections import summary_title

ROOT = Path(__file__).resolve().parents[1]
SCITLDR_DEV = ROOT.parent / "shared" / "data" / "scitldr" / "dev.jsonl"
ABSTRACT = (ROOT / "examples" / "paper_abstract.txt").read_text(encoding="utf-8")

PROSE = [
    "The committee approved the new budget for schools after a long debate.",
    "Grad A: We should record the navigation experiments with wireless microphones.",
    "Implementations use word stem repetition (Youmans, 1991; Reynar, 1994) to detect cohesion.",
    "Run `make -j4 test` before you open a pull request.",
]
NOT_PROSE = [
    "Mm-hmm.",
    "PhD C: Yeah, OK, uh, right.",
    "Number one.",
    "make -j4 test",
    "public static void main(String[] args) { System.out.println(x); }",
    "Installation Usage Contributing License",
    "1. Introduction",
    "$ pip install --upgrade synopsis[embeddings]",
    "psutil currently supports the following platforms:",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_is_informative(text: str) -> None:
    assert is_informative(text)


@pytest.mark.parametrize("text", NOT_PROSE)
def test_backchannels_fragments_code_and_toc_entries_are_not(text: str) -> None:
    assert not is_informative(text)


def test_directed_centrality_ranks_the_sentence_its_followers_restate_first() -> None:
    """PacSum: a sentence gains from the later sentences like it and loses from the earlier ones, so of two
    statements of one point the first ranks higher; lambda1 = 0 is undirected degree over later edges."""
    similarity = np.eye(4)
    similarity[1, 3] = similarity[3, 1] = 0.8  # 1 and 3 say the same thing; 0 and 2 say little in common
    scores = directed_centrality(similarity, beta=0.0, lambda1=-0.6)
    assert int(np.argmax(scores)) == 1 and scores[3] < scores[0]
    # by hand: the only edge above the threshold (min 0) is (1, 3), weight 0.8
    assert np.allclose(scores, [0.0, 0.4 * 0.8, 0.0, -0.6 * 0.8])
    assert np.allclose(directed_centrality(similarity, beta=0.9, lambda1=-0.6), [0, 0, 0, 0])


def test_mmr_does_not_pick_a_near_duplicate_twice() -> None:
    relevance = np.array([1.0, 0.9, 0.6])
    similarity = np.array([[1.0, 0.99, 0.0], [0.99, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert mmr(relevance, similarity, 2, trade_off=0.7) == [0, 2]
    similarity[0, 1] = similarity[1, 0] = 0.9  # similar, not a repeat: relevance alone picks it
    assert mmr(relevance, similarity, 2, trade_off=1.0) == [0, 1]
    assert mmr(relevance, similarity, 2, trade_off=0.7) == [0, 2]


def _meeting() -> Document:
    talk = ["Grad A: Mm-hmm.", "PhD C: Yeah.", "Grad B: OK.", "Grad A: Uh-huh.", "PhD C: Right, right."] * 8
    points = [
        "Professor D: The navigation experiment needs subjects who have never seen the building map.",
        "Grad B: We will record every navigation session with two wireless microphones and a camera.",
        "Grad B: We will record every navigation session with two wireless microphones and a camera.",
        "PhD C: The intention model predicts whether a subject wants to enter the building or look at it.",
    ]
    return Document.from_paragraphs([talk[:20] + points[:2], talk[20:] + points[2:]])


def test_salient_picks_what_was_said_not_backchannels_nor_the_same_thing_twice() -> None:
    document = _meeting()
    picked = [
        document.sentences[i].text for i in SalientSummarizer(k=3, vectors=TfidfVectors()).select(document)
    ]
    assert len(picked) == 3 and all(is_informative(t) for t in picked), picked
    assert len(set(picked)) == 3  # the repeated sentence once


def test_an_instruction_moves_salient_towards_the_query() -> None:
    document = _meeting()
    summarizer = SalientSummarizer(k=1, vectors=TfidfVectors())
    (plain,) = summarizer.select(document)
    (asked,) = summarizer.select(document, "What does the intention model predict?")
    assert "intention model" in document.sentences[asked].text
    assert plain != asked or "intention" in document.sentences[plain].text


def test_by_section_a_window_without_prose_gives_nothing() -> None:
    toc = Section(heading="Contents", paragraphs=[["Installation Usage Contributing License"]])
    body = Section(heading="Usage", paragraphs=[[PROSE[0], PROSE[3]]])
    document = Document(Section(children=[toc, body]))
    (result,) = SalientSummarizer(k=2, vectors=TfidfVectors()).summarize_by_section([document])
    assert [s.text for s in result.summary] == [PROSE[0], PROSE[3]]
    assert result.sections[0].summary == []


def test_the_vocabulary_floor_is_a_low_quantile_not_the_minimum() -> None:
    counts = [(100, 96), (100, 90), (100, 98), (100, 85), (100, 94)]
    floor = known_word_rate_floor(counts)
    assert floor < 0.85  # below the lowest document, far in the fitted tail
    assert known_word_rate_floor(counts, z=0.0) > floor


@pytest.mark.skipif(not SCITLDR_DEV.is_file(), reason="needs ../shared/data/scitldr")
def test_the_bundled_model_calls_no_scitldr_dev_abstract_far_but_by_style() -> None:
    """Length, sections and vocabulary call no dev abstract far; the style check (issue 57) at most 5%."""
    summarizer = PointerGeneratorSummarizer.from_pretrained()
    rows = [json.loads(line) for line in SCITLDR_DEV.read_text(encoding="utf-8").splitlines()]
    far = [summarizer.distances(Document.from_sentences(r["source"])) for r in rows]
    assert [d.measure for f in far for d in f if d.measure != "style"] == []
    assert sum(bool(f) for f in far) <= 0.05 * len(rows)


@pytest.fixture(scope="module")
def default() -> DefaultSummarizer:
    return DefaultSummarizer(
        PointerGeneratorSummarizer.from_pretrained(), SalientSummarizer(vectors=TfidfVectors())
    )


def _readme() -> Document:
    sections = [
        Section(heading="Contents", paragraphs=[["Installation Usage Contributing License"]]),
        Section(heading="Installation", paragraphs=[["make -j4 test", PROSE[3]]]),
        Section(
            heading="Usage",
            paragraphs=[
                [
                    f"The {w} option sets how the service answers a request on a busy machine."
                    for w in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
                ]
            ],
        ),  # fmt: skip
    ]
    return Document(Section(children=sections))


def test_load_summarizer_without_a_method_is_the_default() -> None:
    assert load_summarizer().describe().method == "default"
    assert load_summarizer("pointer-generator").describe().method == "pointer-generator"


def test_out_of_domain_the_default_is_verbatim_sentences_with_one_note(default: DefaultSummarizer) -> None:
    document = _readme()
    (result,) = default.summarize_by_section([document])
    assert result.note is not None and "\n" not in result.note
    assert "3 sections" in result.note and "--method pointer-generator" not in result.note
    assert "model facebook/bart-large-cnn (news summaries; about 1.6 GB to download, once)" in result.note
    assert "--model" not in result.note  # the same words on the page as on the command line
    originals = {s.text for s in document.sentences}
    assert result.summary and all(s.text in originals for s in result.summary)
    assert all([source.text for source in s.sources] == [s.text] for s in result.summary)
    lines = result.prediction.split("\n")
    assert "make -j4 test" not in lines and not any(line.startswith("Installation Usage") for line in lines)


def test_in_domain_the_default_is_the_bundled_model(default: DefaultSummarizer) -> None:
    document = Document.from_text(ABSTRACT)
    (result,) = default.summarize_by_section([document])
    (bundled,) = default.bundled.summarize_by_section([document])
    assert result.note is None and result.prediction == bundled.prediction
    assert default.summarize([document]) == default.bundled.summarize([document])


def test_a_mixed_batch_keeps_its_order_and_its_callbacks_see_their_documents(
    default: DefaultSummarizer,
) -> None:
    documents = [_readme(), Document.from_text(ABSTRACT), _readme()]
    seen: list[int] = []
    results = default.summarize_by_section(documents, on_section=lambda d, _: seen.append(d))
    assert [r.note is None for r in results] == [False, True, False]
    assert set(seen) == {0, 1, 2}
    assert results[0].prediction == results[2].prediction


def test_a_document_is_checked_once_per_summarizer_until_it_is_edited(
    default: DefaultSummarizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request asks for a document's domain three times (its note, the routing, the warning before
    decoding); the words and distances are computed once, and again after an edit (``reindex``)."""
    from synopsis.pipeline import SummarizeRunner
    from synopsis.summarizers.domain import DomainCheck

    checked: list[int] = []
    original = DomainCheck.distances
    monkeypatch.setattr(
        DomainCheck, "distances", lambda self, d, *a, **k: checked.append(id(d)) or original(self, d, *a, **k)
    )
    (summary,) = SummarizeRunner(default, by="document").run(ABSTRACT)
    assert summary.result.note is None and len(checked) == 1
    document = Document.from_text(ABSTRACT)
    default.summarize([document])
    assert default.notes([document]) == [None] and len(checked) == 2
    document.root.paragraphs[0][0] = "A sentence that was edited."
    document.reindex()
    assert default.notes([document]) == [None] and len(checked) == 3


def test_the_cli_default_shows_the_note_and_a_named_method_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    body = "\n\n".join(f"## Part {i}\n\n" + " ".join(PROSE[:1] * 3) for i in range(3))
    readme.write_text("# Tool\n\n" + body + "\n", encoding="utf-8")
    assert main(["summarize", str(readme), "--by", "section"]) == 0
    err = capsys.readouterr().err  # once, on stderr (issue 48: it was printed on stdout too)
    assert err.count("Extractive summary (the document's own sentences") == 1
    assert main(["summarize", str(readme), "--by", "section", "--method", "pointer-generator"]) == 0
    err = capsys.readouterr().err
    assert "Extractive summary" not in err
    assert err.count("far from the inputs this model was trained for") == 1


def test_an_abstract_with_more_rare_terms_than_any_dev_abstract_is_still_in_domain() -> None:
    """The old check's floor was the lowest dev share (84%): 3 of 320 test abstracts fell below it."""
    summarizer = PointerGeneratorSummarizer.from_pretrained()
    profile = summarizer.model.config.source_profile
    letters = "abcdefghijklmnopqrstuvwxyz"  # unknown terms (no digits: a word with one reads as a number)
    rare = [f"zq{letters[i % 26]}{letters[i // 26]}x" for i in range(len(ABSTRACT.split()) // 4)]
    document = Document.from_text(ABSTRACT + " " + " ".join(rare))
    rate = known_word_rate(document_words(document), summarizer.vocab)
    assert 0.7 < rate < profile.known_word_rate_min, rate
    assert summarizer.distances(document) == []


def test_the_cli_default_out_of_domain_writes_the_documents_own_sentences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the runner (by section and whole): the summary is the document's sentences, not the bundled
    model's, and the JSON carries the note."""
    readme = tmp_path / "README.md"
    plain = PROSE[:3]  # no inline markup, so a sentence's text is its source verbatim
    body = "\n\n".join(f"## Part {i}\n\n{plain[i]} {plain[(i + 1) % 3]}" for i in range(3))
    readme.write_text("# Tool\n\n" + body + "\n", encoding="utf-8")
    source = readme.read_text(encoding="utf-8")
    for by in ("section", "document"):
        assert main(["summarize", str(readme), "--by", by, "--output-format", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["note"] and data["note"].startswith("Extractive summary"), by
        assert data["summary"], by
        for sentence in data["summary"]:
            assert sentence["text"] in plain, (by, sentence["text"])
            (cited,) = sentence["sources"]
            assert source[cited["start"] : cited["end"]] == sentence["text"], by


# ---------------------------------------------------------------------- issue 48: a summary a reader trusts
FRAGMENTS = [
    "section about async and await in the docs.",  # the tail of a sentence split after a quotation
    "* estimation based on tests conducted by an internal development team.",  # a footnote marker
    "- Lets you change the global Python version.",  # a bullet marker
    "To install it, run the following commands:",  # a lead-in without what it introduces
    "So i if two or more people are talking about it.",  # speech that restarts
    "Grad G: So I agree that if someone wants to do speech event transcription, that the mixed signals here",
    "Fast to code.",  # fewer than four words
    "Which now allows us to use HTTPX directly from the command-line...",  # runs on; joined to the one before
    "Plus all the standard features of requests...",  # a lead-in into a list, ending in "..."
    "Sending a request to the server from the terminal…",  # runs on into an image
    "And so I think it is just easier to do that face to face.",  # joined to what came before
]


@pytest.mark.parametrize("text", FRAGMENTS)
def test_fragments_markers_and_lead_ins_do_not_stand_alone(text: str) -> None:
    assert not stands_alone(text)


def test_a_sentence_may_start_with_the_documents_lowercase_name() -> None:
    text = "pyenv lets you easily switch between multiple versions of Python."
    assert not stands_alone(text)
    assert stands_alone(text, title_names("Simple Python Version Management: pyenv"))
    assert stands_alone('"Copyright" also means copyright-like laws that apply to other kinds of works.')


FOOTNOTE = "* estimation based on tests conducted by an internal team of engineers."
INSTALL = "Install termplot from PyPI with pip, the Python package installer, in a minute."


def _widget(footnote: str = FOOTNOTE) -> Document:
    """A README: a defining sentence in its preface, then sections whose many similar sentences are more
    central than it, one of them on installing."""
    charts = [
        f"The chart {name} draws data series as lines, bars and areas in the terminal window."
        for name in "ABCDE"
    ]
    return Document(
        Section(
            paragraphs=[
                ["Termplot is a small Python library for drawing charts in a terminal.", footnote],
            ],
            children=[
                Section(heading="Charts", paragraphs=[charts]),
                Section(heading="Colours", paragraphs=[[c.replace("chart", "colour chart") for c in charts]]),
                Section(
                    heading="Installation",
                    paragraphs=[[INSTALL]],
                ),
            ],
        ),
        title="Termplot",
    )


@pytest.fixture(scope="module")
def salient() -> SalientSummarizer:
    return SalientSummarizer(k=2)  # all-MiniLM-L6-v2, the default's vectors


def test_the_document_summary_says_what_the_document_is_first(salient: SalientSummarizer) -> None:
    (result,) = salient.summarize_by_section([_widget()], max_words=40)
    texts = [s.text for s in result.summary]
    assert texts[0] == "Termplot is a small Python library for drawing charts in a terminal."
    assert not any(t.startswith("*") for t in texts)
    assert sum(len(t.split()) for t in texts) <= 40
    # it is chosen over the whole document, not only from the section summaries, and cites itself exactly
    assert all(s.sources[0].text == s.text and s.sources[0].path == () for s in result.summary[:1])


def test_an_instruction_moves_the_document_summary_to_the_answer(salient: SalientSummarizer) -> None:
    document = _widget()
    (plain,) = salient.summarize_by_section([document], max_words=30)
    (asked,) = salient.summarize_by_section([document], ["How do I install termplot?"], max_words=30)
    assert INSTALL in [s.text for s in asked.summary]
    assert [s.text for s in plain.summary] != [s.text for s in asked.summary]


def test_sections_are_chosen_and_reported_one_at_a_time(salient: SalientSummarizer) -> None:
    events: list[str] = []

    class Logged:
        name = "logged"

        def __init__(self, vectors: Any) -> None:
            self.vectors = vectors

        def encode(self, texts: Any) -> Any:
            events.append("encode")
            return self.vectors.encode(texts)

    summarizer = SalientSummarizer(k=2, vectors=Logged(salient.vectors))
    summarizer.summarize_by_section(
        [_widget()],
        ["How are charts drawn in the terminal?"],  # relevance encodes each section's sentences when chosen
        on_section=lambda _, section: events.append(f"section {section.heading}"),
        progress=lambda done, total: events.append(f"{done}/{total}"),
    )
    # each section is counted n/N, and passed on before the next one is chosen
    assert [e for e in events if "/" in e] == ["1/4", "2/4", "3/4", "4/4"]
    assert events.index("section Charts") < events.index("encode", events.index("2/4"))


def test_the_defining_sentence_leads_even_after_a_copyright_line(salient: SalientSummarizer) -> None:
    document = _widget()
    copyright_line = "Copyright (C) 2024 the Termplot team, and everyone may copy this license document."
    document.root.paragraphs.insert(0, [copyright_line])
    document.reindex()
    (result,) = salient.summarize_by_section([document], max_words=60)
    texts = [s.text for s in result.summary]
    assert texts[0] == "Termplot is a small Python library for drawing charts in a terminal."
    assert copyright_line not in texts[:1]


@pytest.mark.parametrize(
    "text",
    [
        "PhD F: Not speech not speech or too much speech here.",
        "With the overlapping zone, overlapping speech speech.",
    ],
)
def test_speech_that_restarts_does_not_stand_alone(text: str) -> None:
    assert not stands_alone(text)


# ---------------------------------------------------------------------- issue 48: review items 1-4
BUGS = """# Frobnicate

Frobnicate is a command-line tool that converts old spreadsheets into clean CSV files.
It keeps every formula's value and drops the formatting.

## Usage

Frobnicate reads every sheet of a workbook and writes one CSV file per sheet into the output folder.
Large workbooks are read in streaming mode so memory use stays flat.
The output folder is created when it does not exist yet.

## Reporting bugs

A good bug report saves everyone a lot of time and makes a fix much more likely:

* The exact [version](https://example.org/v) of Frobnicate you ran.
* The command line and its complete error output.
* A small workbook that shows the problem.

Please search the tracker before you open a new issue.
"""


def _bugs(tmp_path: Path) -> tuple[Any, str]:
    path = tmp_path / "frobnicate.md"
    path.write_text(BUGS, encoding="utf-8")
    return read_source(path), BUGS


def test_a_lead_in_comes_with_its_list_and_an_instruction_finds_it(
    salient: SalientSummarizer, tmp_path: Path
) -> None:
    parsed, text = _bugs(tmp_path)
    asked = "What should a bug report include?"
    (plain,) = salient.summarize_by_section([parsed.document], max_words=80, offsets=[parsed.offsets])
    (result,) = salient.summarize_by_section(
        [parsed.document], [asked], max_words=80, offsets=[parsed.offsets]
    )
    (unit,) = [s for s in result.summary if s.text.startswith("A good bug report")]
    assert not any(s.text.startswith("A good bug report") for s in plain.summary)  # the instruction moved it
    assert unit.text == (
        "A good bug report saves everyone a lot of time and makes a fix much more likely: The exact version "
        "of Frobnicate you ran. The command line and its complete error output. A small workbook that shows "
        "the problem."
    )
    # the lead-in and each item cite their own exact characters; an item is not one of the section's sentences
    assert [s.sentence is None for s in unit.sources] == [False, True, True, True]
    for source in unit.sources:
        assert text[source.start : source.end].replace("[", "").replace("](https://example.org/v)", "") == (
            source.text
        )
    # the section summaries never show a lead-in alone; the section's own summary shows it with its list
    assert not any(s.text.endswith(":") for node in result.walk() for s in node.summary)
    (bugs,) = [node for node in result.walk() if node.heading == "Reporting bugs"]
    assert unit.text in [s.text for s in bugs.summary]


class _Keywords:
    """Sentence vectors that count a few keywords (a last constant dimension keeps every vector nonzero)."""

    name = "keywords"
    words = ("terminat", "copy", "chart", "warranty")

    def encode(self, texts: Any) -> np.ndarray:
        rows = np.array([[t.lower().count(w) for w in self.words] + [0.1] for t in texts], dtype=float)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_an_instruction_is_read_against_each_sentence_under_its_heading() -> None:
    document = Document(
        Section(children=[
            Section(heading="History", paragraphs=[["The project was started in a small garden shed."]]),
            Section(heading="Termination", paragraphs=[["Your rights end and you must delete every copy."]]),
            Section(heading="Warranty", paragraphs=[["The tool comes with no warranty of any kind."]]),
        ])
    )  # fmt: skip
    summarizer = SalientSummarizer(k=1, vectors=_Keywords())
    # the answer shares no word with the question; its heading does
    (result,) = summarizer.summarize_by_section([document], ["When is it terminated?"], max_words=10)
    assert [s.text for s in result.summary] == ["Your rights end and you must delete every copy."]


def test_a_sentence_opening_with_a_pronoun_comes_only_after_the_one_before() -> None:
    similarity = np.eye(3)
    relevance = np.array([0.1, 1.0, 0.5])
    words = np.array([10, 10, 10])
    assert budgeted_mmr(relevance, similarity, words, 20, 0.7, after=np.array([-1, 0, -1])) == [2, 0]
    assert budgeted_mmr(relevance, similarity, words, 30, 0.7, after=np.array([-1, 0, -1])) == [2, 0, 1]
    assert budgeted_mmr(relevance, similarity, words, 30, 0.7, after=np.array([-1, -2, -1])) == [2, 0]


def test_the_summary_is_headed_by_what_the_document_is_called(tmp_path: Path) -> None:
    parsed, _ = _bugs(tmp_path)
    assert summary_title(parsed.document) == "Frobnicate"
    meeting = Document(
        Section(children=[
            Section(heading="Budget", paragraphs=[["Grad A: We spend too much on coffee."]]),
            Section(heading="Nothing"),  # a heading over no text says nothing of what the meeting holds
            Section(heading="Microphones", paragraphs=[["PhD C: The wireless ones are better."]]),
        ])
    )  # fmt: skip
    assert summary_title(meeting) == "Budget · Microphones"
    untitled = Document(Section(paragraphs=[["Termplot draws charts."]], children=[Section("Usage")]))
    assert summary_title(untitled) is None  # its opening prose says what it is


def test_a_heading_over_nothing_shown_is_not_printed() -> None:
    from synopsis.cli.output import BlockWriter

    document = Document(
        Section(
            paragraphs=[["Frobnicate is a command-line tool that converts old spreadsheets into CSV files."]],
            children=[
                Section(heading="Release Information", children=[
                    Section(heading="Fixed", paragraphs=[Paragraph(["Fixed a crash (#12)."], "list")]),
                ]),
                Section(heading="Usage", children=[
                    Section(heading="Reading", paragraphs=[[
                        "Frobnicate reads every sheet of a workbook and writes one CSV file per sheet.",
                    ]]),
                ]),
            ],
        ),
        title="Frobnicate",
    )  # fmt: skip
    lines: list[str] = []
    writer = BlockWriter(type("Sink", (), {"append": lambda self, new: lines.extend(new)})(), False, False)
    summarizer = SalientSummarizer(k=2, vectors=TfidfVectors())
    (result,) = summarizer.summarize_by_section(
        [document], on_section=lambda i, node: writer.section(i, None, node)
    )
    assert "# Release Information\n" not in lines and "## Fixed\n" not in lines
    assert lines.index("# Usage\n") < lines.index("## Reading\n")  # a parent heading comes with what it heads
    tree = result.to_dict()["sections"]
    assert [(s["heading"], s["skipped"]) for s in tree] == [("Release Information", True), ("Usage", False)]
    assert tree[0]["sections"][0]["skipped"]


# ---------------------------------------------------------------------- issue 48b: a lead-in with its command
WIDGET = """# Widget

Widget is a small library for drawing widgets on a terminal screen.

## Installation

Install the released version with pip:

```console
$ pip install widget
```

Build it from a checkout with the following commands:

```console
$ git clone https://example.org/widget.git
$ cd widget
$ make install
```

## Usage

Widget draws boxes, lines and gauges with a few calls. Each widget redraws itself when its data changes.
"""


def test_a_lead_in_comes_with_its_short_command_and_install_questions_find_it(
    salient: SalientSummarizer, tmp_path: Path
) -> None:
    path = tmp_path / "README.md"
    path.write_text(WIDGET, encoding="utf-8")
    parsed = read_source(path)
    asked = "How do I install it?"
    unit = "Install the released version with pip: `$ pip install widget`"
    # by document (a short README's default) and in the document summary by section
    (plain, answered) = salient.summarize([parsed.document] * 2, [None, asked])
    assert unit in answered.splitlines() and unit not in plain.splitlines()
    (result,) = salient.summarize_by_section(
        [parsed.document], [asked], max_words=40, offsets=[parsed.offsets]
    )
    (chosen,) = [s for s in result.summary if s.text == unit]
    lead_in, code = chosen.sources
    assert (lead_in.sentence, code.sentence) == (0, None)  # the code is not one of the section's sentences
    assert WIDGET[lead_in.start : lead_in.end] == "Install the released version with pip:"
    assert WIDGET[code.start : code.end] == "```console\n$ pip install widget\n```"  # the whole block
    # a longer block (a program, three lines) is never carried, and no sentence is chosen from code
    shown = [s.text for node in result.walk() for s in node.summary] + [s.text for s in result.summary]
    assert not any("Build it from" in t or "make install" in t for t in shown)
    # without an instruction a command is never a candidate: it would push prose out of a summary
    (plain_result,) = salient.summarize_by_section(
        [parsed.document], [None], max_words=40, offsets=[parsed.offsets]
    )
    shown = [s.text for node in plain_result.walk() for s in node.summary] + [
        s.text for s in plain_result.summary
    ]
    assert shown and not any("pip install" in t for t in shown)


def test_only_a_short_code_block_is_a_command() -> None:
    assert inline_code("pip install widget\nwidget init") == "`pip install widget`; `widget init`"
    assert inline_code("echo `date`") == "`` echo `date` ``"  # CommonMark: a backtick inside is fenced by two
    document = Document(
        Section(paragraphs=[
            ["Widget draws boxes, lines and gauges on a terminal screen."],
            ["Install the released version with pip:"],
            Paragraph(["pip install widget --upgrade-strategy eager " + "x" * 40], "code"),
        ])
    )  # fmt: skip
    units = lead_in_units(document, all_sources(document), spans=False)
    lead_in = "Install the released version with pip:"
    assert [s.text for s in units[1]] == [lead_in, document.root.paragraphs[2][0]]
    document.root.paragraphs[2] = Paragraph(["pip install widget " + "x" * 100], "code")  # a line over 100
    document.reindex()
    assert lead_in_units(document, all_sources(document), spans=False) == {}
