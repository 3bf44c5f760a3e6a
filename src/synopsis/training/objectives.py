"""What a seq2seq fine-tuning run minimises and selects its model by: the label-smoothed cross-entropy
(:func:`label_smoothed_nll`, fairseq's two forms) and the dev set's mean ROUGE-1/2/L F1
(:func:`score_summaries`, :func:`rouge_average`), also what the experiments score their predictions with."""

from __future__ import annotations

from collections.abc import Sequence

import torch

METRICS = ("rouge1", "rouge2", "rougeL")


def rouge_average(scores: dict[str, float]) -> float:
    """The model-selection score: mean of ROUGE-1/2/L F1 (the papers' "average")."""
    return sum(scores[m] for m in METRICS) / len(METRICS)


def score_summaries(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Corpus-mean ROUGE-1/2/L F1 x 100 (rouge-score tokenisation, Porter stemming, max over references)."""
    from synopsis.evaluation.rouge import RougeScorer

    scorer = RougeScorer(rouge_types=METRICS, use_stemmer=True)
    totals = dict.fromkeys(METRICS, 0.0)
    for prediction, refs in zip(predictions, references, strict=True):
        scores = scorer.score_multi(list(refs), prediction, aggregate="max")
        for metric in METRICS:
            totals[metric] += scores[metric].fmeasure
    return {m: 100 * totals[m] / max(len(predictions), 1) for m in METRICS}


LABEL_SMOOTHING_FORMS = ("others", "uniform")  # eps over the other words, or over all of them


def label_smoothed_nll(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float, form: str = "others"
) -> torch.Tensor:
    """Label-smoothed cross-entropy (Szegedy et al., 2016, section 7), mean over labels that are not -100, as
    fairseq's ``label_smoothed_cross_entropy``. ``"others"`` (today's fairseq): the target gets ``1 - eps``,
    every other word ``eps / (V - 1)``. ``"uniform"`` (fairseq <= 0.10, which trained BART; torch's
    ``label_smoothing``): ``(1 - eps) nll + eps / V sum_w -log p(w)``. ``epsilon = 0``: cross-entropy."""
    mask = labels.ne(-100)
    log_probs = torch.log_softmax(logits, dim=-1, dtype=torch.promote_types(logits.dtype, torch.float32))
    nll = -log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.sum(-1)
    others = form == "others"
    eps_i = epsilon / (logits.size(-1) - 1 if others else logits.size(-1))
    loss = (1.0 - epsilon - (eps_i if others else 0.0)) * nll + eps_i * smooth
    return (loss * mask).sum() / mask.sum().clamp(min=1)
