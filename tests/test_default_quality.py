"""Issue 57: PacSum at the core of salient, the budget filled with whole sentences, PTB-tokenized text read as
written text is, instructions that find the answer (BM25 + embeddings + neighbouring turns, general requests
answered with the general summary), each result naming its method, and an extractive path without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from synopsis.cli import main
from synopsis.document import Document
from synopsis.summarizers.salient import (
    SalientSummarizer,
    TfidfVectors,
    is_general,
    stands_alone,
)
from synopsis.summarizers.salient.relevance import bm25_scores, neighbouring_turns
from synopsis.summarizers.salient.rules import is_cased, spoken

ROOT = Path(__file__).resolve().parents[1]
QMSUM = ROOT.parent / "shared" / "data" / "qmsum"

RAW = [
    "(CNN) The city council voted on Tuesday to rebuild the old bridge over the river by next summer.",
    '"We have waited long enough," the mayor said after the vote on the bridge.',
    "The bridge was closed in 2019 after engineers found cracks in two of its supports.",
    "Residents (many of whom cross it daily) had asked the council for a new bridge for years.",
    "The new bridge will cost $12 million, paid by the state and the city.",
    "Work on the bridge begins in March, and the old bridge will be taken down first.",
]
# the same article as CNN/DailyMail is published (PTB tokens: `` '' -LRB- -RRB- n't, quotes split off)
PTB = [
    "-LRB- CNN -RRB- The city council voted on Tuesday to rebuild the old bridge over the river by next "
    "summer .",
    "`` We have waited long enough , '' the mayor said after the vote on the bridge .",
    "The bridge was closed in 2019 after engineers found cracks in two of its supports .",
    "Residents -LRB- many of whom cross it daily -RRB- had asked the council for a new bridge for years .",
    "The new bridge will cost $ 12 million , paid by the state and the city .",
    "Work on the bridge begins in March , and the old bridge will be taken down first .",
]


def _salient(**options: object) -> SalientSummarizer:
    return SalientSummarizer(vectors=TfidfVectors(), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [*RAW, *PTB])
def test_written_and_ptb_tokenized_sentences_stand_alone_alike(text: str) -> None:
    assert stands_alone(text, speech=False), text


def test_ptb_tokenized_text_gets_the_summary_written_text_gets() -> None:
    raw, ptb = Document.from_paragraphs([RAW]), Document.from_paragraphs([PTB])
    assert [len(d.sentences) for d in (raw, ptb)] == [6, 6]
    chosen = [
        [s.sources[0].sentence for s in _salient().for_document(d).document_summary(None, 45)]
        for d in (raw, ptb)
    ]
    assert chosen[0] == chosen[1] and 0 in chosen[0]


def test_a_lowercased_document_is_read_as_one() -> None:
    """arXiv/PubMed as released are lowercased: a lowercase start is no sign of a broken sentence there."""
    lowered = Document.from_paragraphs([[s.lower() for s in RAW]])
    assert not is_cased(lowered) and is_cased(Document.from_paragraphs([RAW]))
    summary = _salient().for_document(lowered).document_summary(None, 60)
    assert summary and all(s.text[0].islower() or not s.text[0].isalpha() for s in summary)


def test_a_headline_before_a_colon_is_not_a_speaker() -> None:
    assert spoken("Drank himself to death : the coroner read the results .").startswith("Drank")
    assert spoken("Grad A: We should record the sessions.") == "We should record the sessions."


def test_the_budget_is_filled_with_whole_sentences_a_long_lead_sentence_included() -> None:
    lead = (
        "The city council voted on Tuesday to rebuild the old bridge over the river by next summer after "
        "engineers found cracks in two of its supports and residents asked for years."
    )  # 30 words: more than a third of 84 (the old rule left such a sentence out)
    sentences = [lead, *RAW[1:]] + [
        f"Another {n} point about the bridge was raised at the meeting." for n in range(8)
    ]
    document = Document.from_paragraphs([sentences])
    summary = _salient().for_document(document).document_summary(None, 84)
    words = [len(s.text.split()) for s in summary]
    assert summary[0].text == lead
    assert sum(words) <= 84
    rest = [len(s.split()) for s in sentences if s not in {x.text for x in summary}]
    assert sum(words) + min(rest) > 84  # no sentence left out would have fitted


def test_general_requests_get_the_general_summary() -> None:
    for request in (
        "Summarize the whole meeting.",
        "What was discussed in the meeting?",
        "Summarize the Meeting",
    ):
        assert is_general(request), request
    for question in (
        "Summarize the discussion about the remote control",
        "What did the Professor think of it?",
    ):
        assert not is_general(question), question
    document = Document.from_paragraphs([RAW])
    run = _salient().for_document(document)
    assert run.document_summary("Summarize the whole document.", 50) == run.document_summary(None, 50)


@pytest.mark.skipif(not QMSUM.is_dir(), reason="../shared/data/qmsum is absent")
def test_every_qmsum_general_query_is_general_and_no_specific_one_is() -> None:
    general, specific = [], []
    for path in sorted(QMSUM.glob("*/*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        general += [q["query"] for q in record["general_query_list"]]
        specific += [q["query"] for q in record["specific_query_list"]]
    # two that name what to look for: "Summarize what was said about digits form", "What were the resolutions"
    assert [q for q in general if not is_general(q)] == [
        q for q in general if "digits" in q or "resolut" in q
    ]
    assert sum(is_general(q) for q in specific) <= 2, [q for q in specific if is_general(q)]


def test_bm25_is_okapi_bm25_over_stemmed_content_words() -> None:
    """The library's scores, checked by hand (Lucene's variant: idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
    tf / (tf + k1 (1 - b + b L / avg L)), k1 = 1.5, b = 0.75) for one term."""
    texts = ["The bridges were rebuilt.", "A river.", "The bridge over the river.", "Nothing here at all."]
    scores = bm25_scores(texts, "bridge")
    lengths = np.array([2, 1, 2, 1], dtype=float)  # content words
    idf = np.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    tf = np.array([1, 0, 1, 0], dtype=float)
    expected = idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * lengths / lengths.mean()))
    assert np.allclose(scores, expected, atol=1e-5)
    assert not bm25_scores(texts, "the of and").any()


def test_the_turns_around_a_sentence_add_to_its_relevance() -> None:
    scores = np.array([0.0, 0.0, 1.0, 0.2, 0.0])
    turns = np.array([0, 1, 2, 3, 3])
    smoothed = neighbouring_turns(scores, turns)
    assert smoothed[1] > scores[1] and smoothed[3] > scores[3] and smoothed[0] == 0.0
    assert int(np.argmax(smoothed)) == 2


def test_an_instruction_finds_the_answer_turn_in_a_transcript() -> None:
    turns = [
        "Professor B: Welcome everyone, we are recording today's meeting now.",
        "Grad A: The belief net has three layers of nodes for the intentions of the tourist.",
        "Grad C: Its input nodes are the things the tourist says and where the tourist is standing.",
        "PhD D: Yet another PowerPoint presentation about the schedule for next week.",
        "Professor B: The budget for new microphones is approved for next term.",
    ]
    document = Document.from_paragraphs([[t] for t in turns])
    run = _salient().for_document(document)
    answer = run.document_summary("What is the structure of the belief net?", 16)
    assert [s.text for s in answer] == [turns[1]]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_every_result_names_the_method_that_wrote_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    article = tmp_path / "article.txt"
    article.write_text(" ".join(RAW * 10), encoding="utf-8")
    code, out, err = _run(["summarize", str(article), "--output-format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["method"] == "salient"
    code, out, err = _run(
        ["summarize", str(ROOT / "examples" / "paper_abstract.txt"), "--output-format", "json"], capsys
    )
    assert code == 0, err
    assert json.loads(out)["method"] == "pointer-generator"
    code, out, err = _run(
        ["summarize", str(article), "--method", "lead-3", "--output-format", "json"], capsys
    )
    assert code == 0, err
    assert json.loads(out)["method"] == "lead-3"


def test_the_extractive_path_loads_neither_torch_nor_the_bundled_model(tmp_path: Path) -> None:
    """Item 7: an article summarized by salient sentences pays for neither torch nor the bundled model's
    weights (the speed itself is measured by benchmarks/default_quality.py --speed)."""
    article = tmp_path / "article.txt"
    article.write_text(" ".join(RAW * 4), encoding="utf-8")
    code = (
        "import sys; from synopsis.cli import main; code = main(['-q', 'summarize', sys.argv[1], '--method',"
        " 'salient']); print(code, 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(article)], capture_output=True, text=True, check=True
    )
    assert result.stdout.split()[-2:] == ["0", "False"], result.stdout + result.stderr


def test_bm25_says_nothing_on_the_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bm25s sets its logger to DEBUG when imported: its steps ("Building index from tokens") must not reach a
    user's terminal."""
    article = tmp_path / "article.txt"
    article.write_text(" ".join(RAW * 10), encoding="utf-8")
    code, out, err = _run(["summarize", str(article), "-i", "What will the bridge cost?"], capsys)
    assert code == 0, err
    assert "index" not in out + err.lower(), err
