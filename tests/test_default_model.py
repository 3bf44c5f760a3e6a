"""The bundled default model's guards: repetition figures, decoding guards from generation_config.json, and
the one-line note when a document is far from what the model was trained on."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from synopsis.cli import main
from synopsis.config import DecodingOptions
from synopsis.document import Document, Section
from synopsis.evaluation.corpus import evaluate_corpus
from synopsis.evaluation.metrics import has_doubled_word
from synopsis.models.pointer_generator import (
    PointerGenerator,
    SourceProfile,
    config_for_vocab,
    document_words,
    known_word_rate,
    source_profile,
)
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer, bundled_model_dir
from synopsis.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
ABSTRACT = (
    "We propose a model for learning representations of graphs. The model uses attention over the "
    "neighbours of every node. Experiments show that the model improves accuracy on three benchmarks."
)


def test_doubled_words_and_the_references_rates_are_reported() -> None:
    assert has_doubled_word("We propose a loss loss function.")
    assert not has_doubled_word("We propose a loss function, loss first.")
    assert has_doubled_word("Learning, learning.")  # punctuation is not a word
    predictions = ["a new new model for graphs", "a model for graphs"]
    references = [["a model for graphs and for graphs"], ["a model", "a model model"]]
    report = evaluate_corpus(predictions, references, metrics=("repeat",), bootstrap=0)
    assert report["doubled_words"] == {"predictions": 0.5, "references": 1 / 3}
    # Bigrams of the three references: 1/6 of "a model for graphs and for graphs" repeats, none of
    # "a model", 1/2 of... no: "a model model" has two distinct bigrams.
    assert report["reference_repeated_ngrams"]["2"] == pytest.approx((1 / 6 + 0 + 0) / 3)
    assert report["repeated_ngrams"]["2"] == pytest.approx(0.0)


def _repeating_model(directory: Path, generation: dict) -> Path:
    """A tiny pointer-generator that, whatever it reads, prefers to write "graphs graphs graphs ..."."""
    words = ABSTRACT.lower().replace(".", " .").split()
    vocab = Vocab.build([words], max_size=100)
    torch.manual_seed(0)
    model = PointerGenerator(config_for_vocab(vocab, embedding_dim=8, hidden_dim=8, pointer=False))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(0.01)
        bias = model.out_vocab.bias
        bias.zero_()
        bias[vocab.id("graphs")] = 8.0
        bias[vocab.id("model")] = 6.0
        bias[vocab.id("attention")] = 5.0
    model.save_pretrained(directory, vocab)
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return directory


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_model_that_prefers_to_repeat_no_longer_does_with_the_guards_on(
    tmp_path: Path, num_beams: int
) -> None:
    settings = {"num_beams": num_beams, "min_length": 6, "max_length": 8, "max_source_tokens": 50}
    free = _repeating_model(tmp_path / "free", settings)
    guarded = _repeating_model(tmp_path / "guarded", {**settings, "no_immediate_repeat": True})
    document = Document.from_text(ABSTRACT)
    (free_summary,) = PointerGeneratorSummarizer.from_pretrained(free).summarize([document])
    assert free_summary.lower().startswith("graphs graphs")
    # From the model's own generation_config.json, and as a per-call option on the free model.
    for summarizer in (
        PointerGeneratorSummarizer.from_pretrained(guarded),
        PointerGeneratorSummarizer.from_pretrained(free, no_immediate_repeat=True),
    ):
        (summary,) = summarizer.summarize([document])
        assert not has_doubled_word(summary), summary
    # Both guards together also stop "graph model graph model".
    both = PointerGeneratorSummarizer.from_pretrained(free, no_immediate_repeat=True)
    (summary,) = both.summarize([document], decoding=DecodingOptions(no_repeat_ngram_size=2))
    tokens = summary.lower().split()
    bigrams = list(zip(tokens, tokens[1:], strict=False))
    assert len(set(bigrams)) == len(bigrams) and not has_doubled_word(summary), summary


# ------------------------------------------------------------------------------------- out of scope
def _profiled_summarizer(tmp_path: Path) -> PointerGeneratorSummarizer:
    words = ABSTRACT.lower().replace(".", " .").split()
    vocab = Vocab.build([words], max_size=100)
    profile = source_profile("abstracts", [words, words[:20]], vocab)
    model = PointerGenerator(config_for_vocab(vocab, embedding_dim=4, hidden_dim=4, source_profile=profile))
    model.save_pretrained(tmp_path / "model", vocab)
    (tmp_path / "model" / "generation_config.json").write_text(
        json.dumps({"min_length": 1, "max_length": 3, "max_source_tokens": 40}), encoding="utf-8"
    )
    return PointerGeneratorSummarizer.from_pretrained(tmp_path / "model")


def test_the_profile_is_saved_with_the_model(tmp_path: Path) -> None:
    summarizer = _profiled_summarizer(tmp_path)
    profile = summarizer.model.config.source_profile
    assert isinstance(profile, SourceProfile)
    words = len(ABSTRACT.replace(".", " .").split())
    assert (profile.documents, profile.words_median, profile.words_p99) == (2, words, words)
    assert profile.known_word_rate_min == profile.known_word_rate_median == 1.0
    saved = json.loads((tmp_path / "model" / "config.json").read_text(encoding="utf-8"))
    assert saved["source_profile"] == asdict(profile)


def test_the_profile_rates_are_each_documents_known_word_rate() -> None:
    """source_profile counts each document once (its rates and floor from the same counts): the rates it
    reports are known_word_rate's, documents without a letter count as 1.0."""
    words = ABSTRACT.lower().replace(".", " .").split()
    vocab = Vocab.build([words[:30]], max_size=100)
    sources = [words, words[10:60], ["2017", "."]]
    rates = sorted(known_word_rate(doc, vocab) for doc in sources)
    profile = source_profile("abstracts", sources, vocab)
    assert rates[-1] == 1.0 and rates[0] < 1.0
    assert (profile.known_word_rate_min, profile.known_word_rate_median) == (
        round(rates[0], 4),
        round(rates[1], 4),
    )


def test_in_scope_documents_get_no_note(tmp_path: Path) -> None:
    summarizer = _profiled_summarizer(tmp_path)
    document = Document.from_text(ABSTRACT)
    assert summarizer.scope_note(document) is None


@pytest.mark.parametrize(
    ("document", "fragments"),
    [
        (Document.from_text(" ".join([ABSTRACT] * 6)), ["192 words", "the first 40", "--method salient"]),
        (
            Document(
                Section(children=[Section(heading=h, paragraphs=[[ABSTRACT]]) for h in ("Intro", "Method")])
            ),
            ["2 sections", "HIBRIDS"],
        ),
        (
            Document.from_text("Wir schlagen ein Modell vor, das Graphen mit Aufmerksamkeit lernt."),
            ["0% of its words in the vocabulary", "not English", "--method salient"],
        ),
    ],
    ids=["long", "sectioned", "not-english"],
)
def test_far_documents_get_one_line_saying_why_what_was_done_and_what_fits(
    tmp_path: Path, document: Document, fragments: list[str]
) -> None:
    summarizer = _profiled_summarizer(tmp_path)
    note = summarizer.scope_note(document)
    assert note is not None and "\n" not in note
    for fragment in fragments:
        assert fragment in note, (fragment, note)


def test_summarize_prints_the_note_as_one_warning_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _profiled_summarizer(tmp_path)
    news = tmp_path / "news.txt"
    news.write_text("Der Fluss trat nach einer Woche Regen über die Ufer. Drei Brücken wurden gesperrt.")
    code = main(["summarize", str(news), "--model", str(tmp_path / "model")])
    err = capsys.readouterr().err
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "news: far from the inputs this model was trained for" in lines[0], err


def test_the_bundled_model_knows_its_scope() -> None:
    summarizer = PointerGeneratorSummarizer.from_pretrained()
    profile = summarizer.model.config.source_profile
    assert profile is not None and profile.corpus == "scitldr"
    example = Document.from_text((ROOT / "examples" / "paper_abstract.txt").read_text(encoding="utf-8"))
    assert summarizer.scope_note(example) is None
    assert known_word_rate(document_words(example), summarizer.vocab) > profile.known_word_rate_min
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    long_text = Document.from_text(readme)
    assert summarizer.scope_note(long_text) is not None
    assert (bundled_model_dir() / "model.safetensors").stat().st_size < 50 * 2**20
