"""Our hierarchy F1 against the logic of the HIBRIDS authors' released ``eval_qs_hierarchy_fq.py``.

The released script reads a hierarchy character by character: ``{`` opens the children of the pair before
it, ``|`` separates siblings, ``}`` closes, ``?`` ends a question; pairs are keyed by their summary text.
It parses the reference, then the prediction, with one ``now_question`` flag it never resets in between:
when the reference ends with text the flag is still True, so the prediction's root summary is read as a
question, the prediction's root becomes the empty string, and identical hierarchies score below 1 (0.59
for the figure-like tree below, 0.40 for a root with two children).
:func:`released_f1` below re-states that logic (written for this test, not copied); ``reset=True`` is the
script with the one missing line (``now_question = False`` before the prediction loop).
"""

from __future__ import annotations

import pytest

from synopsis.evaluation.hierarchy import _mapping_scorer, hierarchy_f1
from synopsis.qs import QSNode, QSTree


def _released_parse(text: str, now_question: bool) -> tuple[dict[str, str], set[tuple[str, str]], bool]:
    """(summary -> parent, {(child, parent)}, final now_question) as the released script builds them."""
    heads: dict[str, str] = {}
    relations: set[tuple[str, str]] = set()
    stack: list[str] = []
    first: str | None = None
    question: list[str] = []
    summary: list[str] = []
    words: list[str] = []

    def close() -> str | None:
        """End the pending pair at a marker; returns the summary pushed by ``{`` (None: nothing)."""
        nonlocal first, question, summary, words
        pushed = None
        if first is None:
            first, pushed = "".join(summary).strip(), "".join(summary).strip()
            heads[first] = "ROOT"
            question, summary, words = [], [], []
        elif "".join(question).strip():
            child = "".join(summary).strip()
            parent = stack[-1] if stack else "ROOT"
            heads.setdefault(child, parent)
            relations.add((child, parent))
            question, summary, pushed = [], [], child
        words = []
        return pushed

    for char in text:
        if char in "{|}":
            now_question = True
            pushed = close()
            if char == "{" and pushed is not None:
                stack.append(pushed)
            if char == "}":
                stack = stack[:-1]
        elif char == "?":
            question.append(char)
            now_question = False
        else:
            (question if now_question else summary).append(char)
            words.append(char)
    if "".join(words).strip():
        now_question = True
        close()
    return heads, relations, now_question


def _directed(heads: dict[str, str], relations: set[tuple[str, str]], other: dict[str, str], scorer) -> float:
    if not other:
        return 0.0 if relations else 1.0
    mapped = {}
    for title in heads:
        scored = []
        for candidate in other:
            score = scorer.score(candidate, title)
            scored.append((score["rouge1"].fmeasure + score["rouge2"].fmeasure, candidate))
        mapped[title] = sorted(scored, key=lambda x: x[0], reverse=True)[0]
    total = 0.0
    for title, head in relations:
        if head == "ROOT":
            continue
        (title_score, node), (head_score, target) = mapped[title], mapped[head]
        while node != target and node != "ROOT":
            node = other[node]
        total += (title_score + head_score) / 4 * (node == target)
    return total / len(relations) if relations else 1.0


def released_f1(target: str, prediction: str, *, reset: bool) -> float:
    scorer = _mapping_scorer()
    target_heads, target_relations, now_question = _released_parse(target, False)
    prediction_heads, prediction_relations, _ = _released_parse(prediction, False if reset else now_question)
    precision = _directed(prediction_heads, prediction_relations, target_heads, scorer)
    recall = _directed(target_heads, target_relations, prediction_heads, scorer)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def braces(tree: QSTree) -> str:
    """A tree in the released format (root summary, then ``{Q? A | Q? A {...}}``)."""

    def pair(node: QSNode) -> str:
        text = f"{node.question} {node.summary}" if node.question else node.summary
        return text + (" {" + " | ".join(pair(c) for c in node.children) + "}" if node.children else "")

    return pair(tree.root)


def tree(spec: tuple) -> QSTree:
    def node(item: tuple, root: bool = False) -> QSNode:
        question, summary, *children = item
        return QSNode(None if root else question, summary, [node(c) for c in children])

    return QSTree(node(spec, root=True))


FIGURE = (
    None,
    "the agency audited twelve programs in three states",
    ("Which programs failed?", "four housing programs missed their targets",
     ("Why did they miss?", "staff shortages delayed the reviews")),
    ("What was recommended?", "the agency should hire inspectors and publish results"),
)  # fmt: skip
OTHER = (
    None,
    "the agency audited twelve programs in three states",
    ("What was recommended?", "the agency should hire inspectors and publish results",
     ("Which programs failed?", "four housing programs missed their targets")),
    ("Why did they miss?", "staff shortages delayed the reviews"),
)  # fmt: skip


def test_released_script_scores_identical_hierarchies_two_thirds_and_ours_equals_it_fixed() -> None:
    reference = tree(FIGURE)
    text = braces(reference)
    assert text.startswith("the agency audited") and "{Why did they miss? staff" in text
    heads, _, now_question = _released_parse(text, False)
    assert now_question and "" not in heads  # the flag is left True after the reference...
    assert "" in _released_parse(text, now_question)[0]  # ...so the prediction's root summary is lost
    assert released_f1(text, text, reset=False) == pytest.approx(0.5922, abs=1e-4)  # the released bug
    assert released_f1(text, text, reset=True) == pytest.approx(1.0)
    assert hierarchy_f1(reference, reference).f1 == pytest.approx(1.0)


@pytest.mark.parametrize("generated", [FIGURE, OTHER])
def test_ours_equals_the_released_logic_with_now_question_reset(generated: tuple) -> None:
    reference, prediction = tree(FIGURE), tree(generated)
    ours = hierarchy_f1(prediction, reference).f1
    assert ours == pytest.approx(released_f1(braces(reference), braces(prediction), reset=True))
    if generated is OTHER:
        assert 0.0 < ours < 1.0
