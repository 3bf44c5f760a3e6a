"""The evaluation suite beside ROUGE parity: corpus report, BLEU, METEOR/WordNet, n-gram rates, CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import sacrebleu
from rich.console import Console

from synopsis.cli import main
from synopsis.data.example import Example, write_examples
from synopsis.document import Document
from synopsis.errors import ConfigError, InputError
from synopsis.evaluation import RougeScorer, evaluate_corpus
from synopsis.evaluation.bootstrap import bootstrap_cis
from synopsis.evaluation.metrics import (
    length_stats,
    meteor_scores,
    novel_ngram_rate,
    repeated_ngram_rate,
)
from synopsis.evaluation.report import render_report
from synopsis.evaluation.wordnet import DEBIAN_WORDNET, build_wordnet_dir, load_wordnet


def _scitldr_dev(shared_data: Path, count: int) -> list[dict]:
    lines = (shared_data / "scitldr" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:count]]


def _needs_wordnet() -> None:
    if not (DEBIAN_WORDNET / "data.noun").is_file():
        pytest.skip("Debian WordNet not installed (apt-get install wordnet-base wordnet-sense-index)")


# --- metrics ----------------------------------------------------------------------------------------------


def test_repeated_and_novel_ngram_rates() -> None:
    assert repeated_ngram_rate("a b a b", 1) == 0.5
    assert repeated_ngram_rate("a b a b", 2) == pytest.approx(1 / 3)  # ab, ba, ab
    assert repeated_ngram_rate("a b a b", 3) == 0.0
    assert repeated_ngram_rate("a b", 3) is None
    assert novel_ngram_rate("The cat ate.", "the cat sat on the mat", 1) == pytest.approx(1 / 3)
    assert novel_ngram_rate("The cat ate.", "the cat sat on the mat", 2) == 0.5
    assert novel_ngram_rate("The cat ate.", "the cat sat on the mat", 3) == 1.0
    assert novel_ngram_rate("The cat ate.", "the cat sat on the mat", 4) is None


def test_length_stats() -> None:
    stats = length_stats(["One two three. Four five.", ""], [["one two", "one two three four"], ["x y"]])
    assert stats["prediction_words"] == 2.5
    assert stats["reference_words"] == (3 + 2) / 2
    assert stats["prediction_sentences"] == 1.0  # (2 + 0) / 2
    assert stats["length_ratio"] == 1.0
    assert stats["empty_predictions"] == 1


def test_bootstrap_intervals() -> None:
    values = [float(i % 2) for i in range(100)]
    cis = bootstrap_cis({"half": values, "constant": [0.3] * 100}, n_samples=500, seed=1)
    low, high = cis["half"]
    assert 0.35 < low < 0.5 < high < 0.65
    assert cis["constant"] == pytest.approx((0.3, 0.3))
    assert bootstrap_cis({"half": values}, n_samples=500, seed=1)["half"] == (low, high)
    assert bootstrap_cis({"half": values}, n_samples=500, seed=2)["half"] != (low, high)


def test_meteor_uses_wordnet_synonyms() -> None:
    """'auto' matches 'car' only through WordNet; an unrelated word does not."""
    _needs_wordnet()
    reference = [["the car is fast"]]
    synonym, exact, unrelated = meteor_scores(
        ["the auto is fast", "the car is fast", "the banana is fast"], reference * 3
    )
    assert synonym == exact > 0.9
    assert unrelated < 0.7


def test_wordnet_directory_from_debian(tmp_path: Path) -> None:
    _needs_wordnet()
    target = build_wordnet_dir(tmp_path / "wordnet")
    lexnames = (target / "lexnames").read_text().splitlines()
    assert len(lexnames) == 45 and lexnames[0] == "00\tadj.all\t3" and lexnames[44] == "44\tadj.ppl\t3"
    assert (target / "index.sense").stat().st_size > 1_000_000
    for name in ("data.noun", "index.verb", "verb.exc"):
        assert (target / name).read_bytes() == (DEBIAN_WORDNET / name).read_bytes()
    # The reader METEOR uses (built the same way in the user cache) really is WordNet 3.0.
    wordnet = load_wordnet()
    assert wordnet.get_version() == "3.0" and wordnet.morphy("children") == "child"
    assert "auto" in {lemma.name() for s in wordnet.synsets("car") for lemma in s.lemmas()}


def test_missing_wordnet_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="apt-get install wordnet-base wordnet-sense-index"):
        build_wordnet_dir(tmp_path / "wordnet", source=tmp_path / "no-such-dir")


# --- evaluate_corpus ---------------------------------------------------------------------------------------


def test_evaluate_corpus_on_scitldr(shared_data: Path) -> None:
    examples = _scitldr_dev(shared_data, 80)
    predictions = [e["source"][0] for e in examples]
    references = [e["target"] for e in examples]
    sources = [" ".join(e["source"]) for e in examples]
    report = evaluate_corpus(
        predictions,
        references,
        sources,
        metrics=("rouge", "bleu", "novel", "repeat", "length"),
        bootstrap=200,
    )
    assert report["num_examples"] == 80
    scorer = RougeScorer()
    expected = [
        scorer.score_multi(refs, p)["rouge2"].fmeasure
        for p, refs in zip(predictions, references, strict=True)
    ]
    rouge2 = report["rouge"]["rouge2"]
    assert rouge2["fmeasure"] == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    assert rouge2["fmeasure_ci95"][0] < rouge2["fmeasure"] < rouge2["fmeasure_ci95"][1]
    streams = [
        [refs[k] if k < len(refs) else None for refs in references] for k in range(max(map(len, references)))
    ]
    assert report["bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(predictions, streams).score)
    assert report["novel_ngrams"] == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0}  # lead-1 is extractive
    assert "Porter" in report["settings"]["rouge"] and "sacrebleu" in report["settings"]["bleu"]
    json.dumps(report)  # JSON-ready

    # The TLDRs themselves are abstractive: novel n-grams against the abstract, more so for longer n.
    tldrs = evaluate_corpus([r[0] for r in references], references, sources, metrics=("novel",))
    assert 0.0 < tldrs["novel_ngrams"]["1"] < tldrs["novel_ngrams"]["4"] <= 1.0


def test_evaluate_corpus_perl_mode_and_mean_aggregate(shared_data: Path) -> None:
    examples = _scitldr_dev(shared_data, 30)
    predictions, references = [e["source"][0] for e in examples], [e["target"] for e in examples]
    kwargs = {"metrics": ("rouge",), "aggregate": "mean", "bootstrap": 0}
    perl = evaluate_corpus(predictions, references, mode="perl", **kwargs)
    assert "ROUGE-1.5.5" in perl["settings"]["rouge"] and "bootstrap" not in perl["settings"]
    default = evaluate_corpus(predictions, references, **kwargs)
    # Nearly the same tokens, different stemmers and multi-reference formulas: close, not identical.
    difference = abs(perl["rouge"]["rouge1"]["fmeasure"] - default["rouge"]["rouge1"]["fmeasure"])
    assert 0 < difference < 0.03


def test_evaluate_corpus_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="2 predictions but 1 reference"):
        evaluate_corpus(["a", "b"], [["a"]])
    with pytest.raises(InputError, match="example 2"):
        evaluate_corpus(["a", "b"], [["a"], []])
    with pytest.raises(ConfigError, match="rogue"):
        evaluate_corpus(["a"], [["a"]], metrics=("rogue",))


def test_report_prints_settings_with_scores() -> None:
    report = evaluate_corpus(
        ["the cat sat", "a dog"], [["the cat sat down"], ["a dog barked"]], metrics=("rouge", "length")
    )
    console = Console(record=True, width=150)
    console.print(render_report(report))
    text = console.export_text()
    assert "rougeLsum" in text and "settings:" in text and "NLTK Porter stemmer" in text


# --- CLI ---------------------------------------------------------------------------------------------------


def _write(path: Path, lines: list[str]) -> Path:
    """One text per line (SciTLDR sentences can hold newlines: joined with spaces, as `summarize` does)."""
    path.write_text("".join(" ".join(line.split("\n")) + "\n" for line in lines), encoding="utf-8")
    return path


def test_cli_lines_with_two_reference_files(shared_data: Path, tmp_path: Path, capsys) -> None:
    examples = [e for e in _scitldr_dev(shared_data, 60) if len(e["target"]) >= 2]
    predictions = [e["source"][0] for e in examples]
    pred = _write(tmp_path / "pred.txt", predictions)
    ref1 = _write(tmp_path / "ref1.txt", [e["target"][0] for e in examples])
    ref2 = _write(tmp_path / "ref2.txt", [e["target"][1] for e in examples])
    out = tmp_path / "report.json"
    args = ["evaluate", "-p", str(pred), "-r", str(ref1), "-r", str(ref2), "--metrics", "rouge,bleu,length"]
    assert main([*args, "--aggregate", "mean", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rouge1" in printed and "settings" in printed
    report = json.loads(out.read_text())
    expected = evaluate_corpus(
        predictions,
        [e["target"][:2] for e in examples],
        metrics=("rouge", "bleu", "length"),
        aggregate="mean",
        split_summaries=True,  # one summary per line: evaluate splits sentences with Punkt for ROUGE-Lsum
    )
    assert report["rouge"] == expected["rouge"] and report["bleu"] == expected["bleu"]
    assert report["settings"]["aggregate"] == "mean"
    assert "Punkt" in report["settings"]["sentences"] and "auto" in report["settings"]["sentences"]


def test_cli_example_jsonl_matches_ids_and_takes_sources(tmp_path: Path) -> None:
    docs = {
        "a": ("The cat sat on the mat. It was warm.", ["A cat sat on a mat."]),
        "b": (
            "Stocks fell sharply on Monday. Investors worried.",
            ["Stocks fell.", "Markets dropped on Monday."],
        ),
        "c": ("Rain is expected tomorrow in the north.", ["Rain expected tomorrow."]),
    }
    examples = [Example(id=k, document=Document.from_text(t), references=r) for k, (t, r) in docs.items()]
    refs = tmp_path / "examples.jsonl"
    write_examples(examples, refs)
    predictions = {"a": "The cat sat on the mat.", "b": "Stocks fell sharply.", "c": "Rain tomorrow."}
    order = ["c", "a", "b"]
    pred = _write(
        tmp_path / "pred.jsonl", [json.dumps({"id": k, "prediction": predictions[k]}) for k in order]
    )
    out = tmp_path / "out.json"
    assert (
        main(["evaluate", "-p", str(pred), "-r", str(refs), "--metrics", "rouge,novel", "--json", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    expected = evaluate_corpus(
        [predictions[k] for k in order],
        [docs[k][1] for k in order],
        [docs[k][0] for k in order],
        metrics=("rouge", "novel"),
    )
    assert report["rouge"] == expected["rouge"]
    assert report["novel_ngrams"] == expected["novel_ngrams"]
    assert report["novel_ngrams"]["1"] == 0.0 and report["novel_ngrams"]["2"] > 0.0  # "rain tomorrow"


def test_cli_scitldr_jsonl_references(shared_data: Path, tmp_path: Path) -> None:
    examples = _scitldr_dev(shared_data, 25)
    pred = _write(tmp_path / "pred.txt", [e["source"][-1] for e in examples])
    refs = tmp_path / "dev25.jsonl"
    refs.write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    out = tmp_path / "out.json"
    assert (
        main(["evaluate", "-p", str(pred), "-r", str(refs), "--metrics", "rouge,novel", "--json", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    assert report["num_examples"] == 25 and report["novel_ngrams"]["4"] == 0.0


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("mismatch", "3 references but"),
        ("missing", "no such file"),
        ("empty", "file is empty"),
        ("malformed", "bad.jsonl:2: malformed JSON"),
        ("no_field", "bad.jsonl:1: missing field 'prediction' or 'summary'"),
        ("unknown_id", "id 'zzz' has no references"),
        ("bad_format", "--format must be one of"),
    ],
)
def test_cli_bad_input_is_one_line_error(tmp_path: Path, capsys, case: str, message: str) -> None:
    pred = _write(tmp_path / "pred.txt", ["the cat", "a dog"])
    refs = _write(tmp_path / "refs.txt", ["the cat sat", "a dog ran"])
    out = tmp_path / "out.json"
    if case == "mismatch":
        refs = _write(tmp_path / "refs.txt", ["x", "y", "z"])
    elif case == "missing":
        pred = tmp_path / "absent.txt"
    elif case == "empty":
        pred = _write(tmp_path / "pred.txt", [])
    elif case == "malformed":
        pred = _write(tmp_path / "bad.jsonl", ['{"prediction": "ok"}', '{"prediction": '])
    elif case == "no_field":
        pred = _write(tmp_path / "bad.jsonl", ['{"text": "no prediction key"}'])
    elif case == "unknown_id":
        pred = _write(tmp_path / "p.jsonl", ['{"id": "zzz", "prediction": "x"}'])
        refs = _write(tmp_path / "r.jsonl", ['{"id": "a", "references": ["x"]}'])
    extra = ["--format", "xml"] if case == "bad_format" else []
    code = main(
        ["evaluate", "-p", str(pred), "-r", str(refs), "--metrics", "rouge", "--json", str(out), *extra]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error:") and len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_scorer_handles_random_unicode_without_errors() -> None:
    rng = random.Random(3)
    alphabet = "ab cdé東京\n-.,İ\u212a"
    scorer = RougeScorer(mode="perl")
    for _ in range(50):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        for score in scorer.score(text, text[::-1]).values():
            assert 0.0 <= score.fmeasure <= 1.0
