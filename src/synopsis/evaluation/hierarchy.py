"""Hierarchy F1 of question-summary hierarchies, question BLEU-4 and summary ROUGE.

The structure score of HIBRIDS (Cao & Wang, ACL 2022, section 5), modelled on the labelled attachment score
of dependency parsing. As implemented here, for one generated hierarchy G and one reference R (see
:mod:`synopsis.qs` for the trees; every pair counts, the root included):

1. **Mapping.** Every generated pair g is mapped to the reference pair m(g) whose summary has the highest
   ROUGE-1 F + ROUGE-2 F with g's summary (our :class:`~synopsis.evaluation.rouge.RougeScorer`; ties go to
   the first reference pair in pre-order); s(g) is that highest sum, in [0, 2].
2. **Matches.** A generated relation (parent p, child c) matches when m(p) is a *proper* ancestor of m(c) in
   R: parent-child or ancestor-descendant.
3. **Weights.** A match counts (s(p) + s(c)) / 4, the mean of the four ROUGE F scores of parent and child
   summaries, so a perfectly worded match counts 1 (the public evaluation script divides the same sum by 4).
4. **Precision** = sum of the weights of matched generated relations / number of generated relations.
   **Recall** is the same with the roles swapped: reference pairs are mapped to generated pairs and
   reference relations are checked in G. An empty relation set scores 1.0 (a root-only hierarchy against a
   root-only reference is perfect, as in the public script). **F1** = 2PR / (P + R), 0 when both are 0.
5. Corpus scores are averages of the per-sample P, R and F1 (F1 is not recomputed from the averages).
   Several references per sample: ``max`` keeps the reference with the best F1, ``mean`` averages.

Consequences: identical hierarchies score F1 = 1.0 when every summary has at least two tokens and no two
summaries are identical (a one-word summary has no bigram, so its ROUGE-2 F, and hence its weight, is 0;
duplicate summaries all map to the first of them).

Differences from the public script, which keys pairs by their summary text: there two generated pairs that
map to the *same* reference pair also count as a match (its ancestor walk starts at the child itself), and
pairs with identical summaries collapse into one; here pairs are tree nodes and the ancestor must be proper.
The released script also never resets its ``now_question`` flag between the reference and the prediction,
so the prediction's root summary is read as a question and identical hierarchies score below 1; with that
one line fixed it agrees with this implementation (``tests/test_qs_released_scorer.py``).

Questions: all questions present in a hierarchy (the root's only if the text has it), in pre-order, are
joined into one string per sample and scored with sacrebleu corpus BLEU-4 (as
:func:`synopsis.evaluation.metrics.corpus_bleu`); the mean of per-sample sentence BLEU-4 (lower-cased,
add-1 smoothing for n > 1, effective order), closer to the public script's per-sample NLTK BLEU, is
reported beside it. Summaries: all summaries of a sample, one per line, scored with ROUGE-1/2/Lsum F.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synopsis.errors import InputError
from synopsis.evaluation.rouge import RougeScorer, check_corpus
from synopsis.qs import QSParseError, QSTree, parse, parse_lenient


@dataclass(frozen=True)
class HierarchyScore:
    precision: float
    recall: float
    f1: float
    generated_relations: int
    reference_relations: int


def _mapping_scorer(use_stemmer: bool = True, mode: str = "rouge-score") -> RougeScorer:
    return RougeScorer(("rouge1", "rouge2"), use_stemmer=use_stemmer, mode=mode)


def _pair_scores(generated: list[str], reference: list[str], scorer: RougeScorer) -> list[list[float]]:
    """ROUGE-1 F + ROUGE-2 F of every (generated, reference) summary pair; F is symmetric in the two."""
    rows = []
    for g in generated:
        row = []
        for r in reference:
            score = scorer.score(r, g)
            row.append(score["rouge1"].fmeasure + score["rouge2"].fmeasure)
        rows.append(row)
    return rows


def _is_proper_ancestor(parents: list[int], ancestor: int, node: int) -> bool:
    node = parents[node]
    while node >= 0:
        if node == ancestor:
            return True
        node = parents[node]
    return False


def _directed(source_parents: list[int], target_parents: list[int], scores: list[list[float]]) -> float:
    """Weighted share of the source's relations whose mapped pairs are ancestor-descendant in the target."""
    best = [max(range(len(row)), key=row.__getitem__) for row in scores]  # first of equals
    relations = [(parent, child) for child, parent in enumerate(source_parents) if parent >= 0]
    if not relations:
        return 1.0
    total = 0.0
    for parent, child in relations:
        if _is_proper_ancestor(target_parents, best[parent], best[child]):
            total += (scores[parent][best[parent]] + scores[child][best[child]]) / 4
    return total / len(relations)


def hierarchy_f1(generated: QSTree, reference: QSTree, scorer: RougeScorer | None = None) -> HierarchyScore:
    """Hierarchy precision, recall and F1 of one generated hierarchy (see the module docstring)."""
    scorer = scorer or _mapping_scorer()
    scores = _pair_scores(generated.summaries(), reference.summaries(), scorer)
    transposed = [list(column) for column in zip(*scores, strict=True)]
    gen_parents, ref_parents = generated.parents(), reference.parents()
    precision = _directed(gen_parents, ref_parents, scores)
    recall = _directed(ref_parents, gen_parents, transposed)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return HierarchyScore(precision, recall, f1, len(gen_parents) - 1, len(ref_parents) - 1)


def parse_hierarchies(
    texts: Sequence[str], where: Sequence[str], lenient: bool = False
) -> tuple[list[QSTree], dict[str, int]]:
    """Parse linearised hierarchies; ``where[i]`` ("file:line") names text i in error messages.

    Strict: the first malformed text raises ``InputError("file:line:column: malformed QS hierarchy: ...")``.
    Lenient: every text is parsed with :func:`synopsis.qs.parse_lenient`; the returned counts say how many
    texts were malformed, how many pairs were dropped and how many repairs were made.
    """
    trees: list[QSTree] = []
    counts = {"malformed": 0, "dropped_pairs": 0, "repairs": 0}
    for text, place in zip(texts, where, strict=True):
        if lenient:
            result = parse_lenient(text)
            trees.append(result.tree)
            counts["malformed"] += not result.ok
            counts["dropped_pairs"] += result.dropped
            counts["repairs"] += result.repaired
            continue
        try:
            trees.append(parse(text))
        except QSParseError as err:
            raise InputError(
                f"{place}:{err.position + 1}: malformed QS hierarchy: {err.problem} (at {err.token!r})"
            ) from None
    return trees, counts


def _question_bleu(predictions: list[str], references: list[list[str]]) -> dict[str, Any]:
    from sacrebleu.metrics import BLEU

    from synopsis.evaluation.metrics import corpus_bleu

    result = corpus_bleu(predictions, references)
    sentence = BLEU(lowercase=True, smooth_method="add-k", smooth_value=1, effective_order=True)
    per_sample = [
        sentence.sentence_score(p, [r for r in refs if r]).score / 100
        for p, refs in zip(predictions, references, strict=True)
        if any(refs)
    ]
    result["sentence_mean"] = sum(per_sample) / len(per_sample) if per_sample else None
    result["sentence_examples"] = len(per_sample)
    return result


def evaluate_hierarchies(
    predictions: Sequence[QSTree],
    references: Sequence[Sequence[QSTree]],
    *,
    aggregate: str = "max",
    use_stemmer: bool = True,
    mode: str = "rouge-score",
    split_summaries: bool = False,
) -> dict[str, Any]:
    """Hierarchy P/R/F1, question BLEU-4 and summary ROUGE of a corpus, as a JSON-ready dict.

    ``references[i]`` holds one or more reference hierarchies for ``predictions[i]``; ``aggregate`` combines
    them (``max``: the reference with the best F1; ``mean``: average P, R, F1). ``use_stemmer``, ``mode`` and
    ``split_summaries`` are the ROUGE settings (see :class:`~synopsis.evaluation.rouge.RougeScorer`).
    """
    check_corpus(predictions, references, aggregate, "predicted hierarchies")
    mapping = _mapping_scorer(use_stemmer, mode)
    summary_scorer = RougeScorer(
        ("rouge1", "rouge2", "rougeLsum"), use_stemmer=use_stemmer, mode=mode, split_summaries=split_summaries
    )
    totals = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    rouge = {"rouge1": 0.0, "rouge2": 0.0, "rougeLsum": 0.0}
    pred_questions, ref_questions = [], []
    for i, (prediction, refs) in enumerate(zip(predictions, references, strict=True)):
        if not refs:
            raise InputError(f"example {i + 1}: needs at least one reference hierarchy")
        scores = [hierarchy_f1(prediction, ref, mapping) for ref in refs]
        if aggregate == "max":
            best = max(scores, key=lambda s: s.f1)  # first of equals
            chosen = {"precision": best.precision, "recall": best.recall, "f1": best.f1}
        else:
            chosen = {key: sum(getattr(s, key) for s in scores) / len(scores) for key in totals}
        for key in totals:
            totals[key] += chosen[key]
        summary = summary_scorer.score_multi(
            ["\n".join(ref.summaries()) for ref in refs], "\n".join(prediction.summaries()), aggregate
        )
        for key in rouge:
            rouge[key] += summary[key].fmeasure
        pred_questions.append(" ".join(prediction.questions()))
        ref_questions.append([" ".join(ref.questions()) for ref in refs])
    n = len(predictions)
    return {
        "num_examples": n,
        "hierarchy": {key: value / n for key, value in totals.items()},
        "question_bleu4": _question_bleu(pred_questions, ref_questions),
        "summary_rouge": {key: value / n for key, value in rouge.items()},
        "pairs": {
            "prediction_mean": sum(len(p) for p in predictions) / n,
            "reference_mean": sum(sum(len(r) for r in refs) / len(refs) for refs in references) / n,
            "prediction_depth_mean": sum(p.depth for p in predictions) / n,
            "reference_depth_mean": sum(sum(r.depth for r in refs) / len(refs) for refs in references) / n,
        },
    }


def describe(aggregate: str = "max", lenient: bool = False) -> str:
    """The conventions, to print next to the scores."""
    text = (
        "hierarchy F1 (HIBRIDS): each pair mapped to the other tree's pair with the best ROUGE-1 F + "
        "ROUGE-2 F of the summaries; a relation matches when the mapped pairs are ancestor-descendant; "
        "weight = mean of the 4 ROUGE F; P over generated, R over reference relations (none: 1.0); "
        f"per-sample P/R/F1 averaged; several references: {aggregate}; questions: sacrebleu corpus BLEU-4 "
        "over all questions of a sample (sentence mean: lower-cased, add-1 smoothing); summaries: ROUGE F, "
        "one pair per line"
    )
    if lenient:
        text += "; predictions parsed leniently (malformed parts dropped, counts reported)"
    return text
