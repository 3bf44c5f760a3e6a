"""Evaluation: ROUGE (rouge-score and ROUGE-1.5.5 conventions), BLEU, METEOR, n-gram statistics, CIs."""

from synopsis.evaluation.corpus import METRICS, evaluate_corpus
from synopsis.evaluation.rouge import RougeScorer, Score

__all__ = ["METRICS", "RougeScorer", "Score", "evaluate_corpus"]
