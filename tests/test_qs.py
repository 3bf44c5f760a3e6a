"""Question-summary hierarchies: linearisation, parsing (strict and lenient), outlines, hierarchy F1,
``synopsis evaluate --metrics qs`` and the QMSum-built QSGen-Hier / QSGen-ChildQ corpora."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.cli import main
from synopsis.data.example import read_examples
from synopsis.data.qs import qmsum_hierarchy
from synopsis.data.readers import read_corpus
from synopsis.errors import InputError
from synopsis.evaluation.hierarchy import evaluate_hierarchies, hierarchy_f1, parse_hierarchies
from synopsis.evaluation.metrics import corpus_bleu
from synopsis.qs import (
    ANSWER,
    DOWN,
    RESERVED,
    SAME,
    UP,
    QSNode,
    QSParseError,
    QSTree,
    join_questions,
    linearize,
    outline_labels,
    parse,
    parse_lenient,
    render_outline,
    split_questions,
)


def figure1(root_question: str | None = "Q1") -> QSTree:
    """The paper's Figure 1 shape: Q1 -> (Q1.1, Q1.2 -> Q1.2.1)."""
    return QSTree(
        QSNode(
            root_question,
            "A1",
            [QSNode("Q1.1", "A1.1"), QSNode("Q1.2", "A1.2", [QSNode("Q1.2.1", "A1.2.1")])],
        )
    )


# --------------------------------------------------------------------------- linearisation
def test_paper_example_linearisation() -> None:
    assert linearize(figure1(), root_question=False) == (
        "A1 [L↓] Q1.1 [ANS] A1.1 [L-] Q1.2 [ANS] A1.2 [L↓] Q1.2.1 [ANS] A1.2.1"
    )
    assert (
        linearize(figure1())
        == "Q1 [ANS] A1 [L↓] Q1.1 [ANS] A1.1 [L-] Q1.2 [ANS] A1.2 [L↓] Q1.2.1 [ANS] A1.2.1"
    )
    assert parse(linearize(figure1())) == figure1()
    assert parse(linearize(figure1(), root_question=False)) == figure1(None)


def test_up_marker_once_per_level_climbed() -> None:
    deep = QSNode("Q1.1", "A1.1", [QSNode("Q1.1.1", "A1.1.1", [QSNode("Q1.1.1.1", "A1.1.1.1")])])
    tree = QSTree(QSNode(None, "A1", [deep, QSNode("Q1.2", "A1.2")]))
    text = linearize(tree)
    assert text == (
        "A1 [L↓] Q1.1 [ANS] A1.1 [L↓] Q1.1.1 [ANS] A1.1.1 [L↓] Q1.1.1.1 [ANS] A1.1.1.1 "
        "[L↑] [L↑] Q1.2 [ANS] A1.2"
    )
    assert parse(text) == tree
    # the public code's output for this tree (never [L↑]; [L↓] once per level of absolute depth) parses to a
    # different tree, or not at all: here its second [L↓] is refused
    with pytest.raises(QSParseError, match="twice in a row"):
        parse("A1 [L↓] Q1.1 [ANS] A1.1 [L↓] [L↓] Q1.1.1 [ANS] A1.1.1")


def test_linearize_normalises_whitespace_and_refuses_bad_trees() -> None:
    tree = QSTree(QSNode(" What\nhappened? ", "It  rained.\n", [QSNode("Why?", "Clouds.")]))
    assert linearize(tree) == "What happened? [ANS] It rained. [L↓] Why? [ANS] Clouds."
    with pytest.raises(InputError, match=r"QS pair 1.1: the summary contains the reserved marker \[L-\]"):
        linearize(QSTree(QSNode(None, "A", [QSNode("Q", "x [L-] y")])))
    with pytest.raises(InputError, match="QS pair 1.2: the summary is empty"):
        linearize(QSTree(QSNode(None, "A", [QSNode("Q", "B"), QSNode("Q2", "  ")])))
    with pytest.raises(InputError, match="QS pair 1.1: only the root pair may lack a question"):
        linearize(QSTree(QSNode(None, "A", [QSNode(None, "B")])))


def test_tree_views() -> None:
    tree = figure1()
    assert tree.parents() == [-1, 0, 0, 2]
    assert tree.relations() == [(0, 1), (0, 2), (2, 3)]
    assert tree.depth == 2 and len(tree) == 4
    assert outline_labels(tree) == ["1", "1.1", "1.2", "1.2.1"]
    assert tree.questions() == ["Q1", "Q1.1", "Q1.2", "Q1.2.1"]
    assert figure1(None).questions() == ["Q1.1", "Q1.2", "Q1.2.1"]
    assert QSTree.from_dict(json.loads(json.dumps(tree.to_dict()))) == tree
    with pytest.raises(InputError, match=r"hierarchy.children\[1\]: field 'summary' must be a string"):
        QSTree.from_dict(
            {"question": None, "summary": "A", "children": [{"summary": "B"}, {"question": "Q"}]}
        )


def test_child_questions_join_and_split() -> None:
    text = join_questions(["What did A say?", "Summarize the rest"])
    assert text == "What did A say? [L-] Summarize the rest"
    assert split_questions(text) == ["What did A say?", "Summarize the rest"]
    with pytest.raises(InputError):
        join_questions(["ok?", "bad [ANS] one"])


# --------------------------------------------------------------------------- strict parser errors
@pytest.mark.parametrize(
    ("text", "position", "token", "problem"),
    [
        ("", 0, "", "empty hierarchy"),
        ("   ", 0, "   ", "empty hierarchy"),
        ("[L↓] Q [ANS] A", 0, DOWN, "starts with a marker"),
        ("A [L↓] [L↓] Q [ANS] B", 7, DOWN, "[L↓] twice in a row"),
        ("A [L-] Q [ANS] B", 2, SAME, "the root has no siblings"),
        ("A [L↓] Q [ANS] B [L↑] Q2 [ANS] C", 17, UP, "climbs above the root's children"),
        ("A [L↓] Q [ANS] B [L↓] R [ANS] C [L↑] [L↑] S [ANS] D", 37, UP, "climbs above"),
        ("A [L↓] Q [ANS] B [L↓] R [ANS] C [L↑] [L-] S [ANS] D", 37, SAME, "[L-] right after [L↑]"),
        ("A [L↓] Q [ANS] B [L-] [L-] R [ANS] C", 22, SAME, "[L-] twice in a row"),
        ("A [L↓] Q B", 7, "Q B", "no question"),
        ("A [L↓] [ANS] B", 7, ANSWER, "empty question"),
        ("A [L↓] Q [ANS]", 9, ANSWER, "empty summary"),
        ("A [L↓] Q [ANS] B [ANS] C", 17, ANSWER, "a second [ANS]"),
        ("Q [ANS] A [ANS] B", 10, ANSWER, "a second [ANS]"),
        ("[ANS] A [L↓] Q [ANS] B", 0, ANSWER, "empty question"),
        ("A [L↓] Q [ANS] B [L↓]", 17, DOWN, "at the end"),
    ],
)
def test_malformed_input_reports_position_and_token(
    text: str, position: int, token: str, problem: str
) -> None:
    with pytest.raises(QSParseError) as info:
        parse(text)
    err = info.value
    assert (err.position, err.token) == (position, token)
    assert problem in err.problem
    assert str(err).startswith(f"character {position + 1}: ")
    assert isinstance(err, InputError)
    assert not parse_lenient(text).ok  # the lenient parser notices the same problem


# --------------------------------------------------------------------------- lenient parser
def test_lenient_repairs_marker_runs_and_drops_unrecoverable_pairs() -> None:
    text = "A [L↓] [L↓] Q1 [ANS] B1 [L↓] no question here [L↓] Q3 [ANS] B3 [L↑] [L↑] [L↑] Q4 [ANS] B4 [L-]"
    result = parse_lenient(text)
    # the pair without [ANS] is dropped; its child moves up to Q1, the nearest kept ancestor
    assert result.tree == QSTree(
        QSNode(None, "A", [QSNode("Q1", "B1", [QSNode("Q3", "B3")]), QSNode("Q4", "B4")])
    )
    assert result.dropped == 1 and result.repaired == 2
    assert [(p.position, p.action) for p in result.problems] == [
        (2, "repaired"),  # [L↓] [L↓] read as one level down
        (29, "dropped"),  # "no question here"
        (63, "repaired"),  # three [L↑] from depth 3 climb to depth 1 only
        (90, "ignored"),  # trailing [L-]
    ]
    assert all(text[p.position :].startswith(p.token) for p in result.problems)


def test_lenient_without_root_summary_and_empty_text() -> None:
    result = parse_lenient("[L↓] Q [ANS] B")
    assert result.tree == QSTree(QSNode(None, "", [QSNode("Q", "B")]))
    assert result.problems[0].problem == "no root summary"
    assert parse_lenient("").tree == QSTree(QSNode(None, ""))
    assert parse_lenient(linearize(figure1())).ok


# --------------------------------------------------------------------------- property tests
_RESERVED_RE = re.compile("|".join(re.escape(m) for m in RESERVED))
_ALPHABET = st.sampled_from(list("ab Z?.,[]L-↓↑ANS\n\t\u00a0é東"))
_texts = (
    st.text(_ALPHABET, min_size=1, max_size=12)
    .map(lambda s: " ".join(s.split()))
    .filter(lambda s: bool(s) and not _RESERVED_RE.search(s))
)


def _node(children: st.SearchStrategy[list[QSNode]]) -> st.SearchStrategy[QSNode]:
    return st.builds(QSNode, _texts, _texts, children)


_nodes = st.recursive(_node(st.just([])), lambda inner: _node(st.lists(inner, max_size=4)), max_leaves=30)
_trees = st.builds(lambda root, q: QSTree(QSNode(q, root.summary, root.children)), _nodes, st.none() | _texts)


def _climbs(tree: QSTree) -> int:
    depths = [depth for depth, _ in tree.walk()]
    return sum(max(a - b, 0) for a, b in zip(depths, depths[1:], strict=False))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees)
def test_round_trip_of_random_trees(tree: QSTree) -> None:
    text = linearize(tree)
    assert parse(text) == tree
    assert parse_lenient(text).tree == tree and parse_lenient(text).ok
    assert text.count(UP) == _climbs(tree)  # one [L↑] per level climbed
    without = parse(linearize(tree, root_question=False))
    assert without.root.question is None and without.root.children == tree.root.children


_pieces = st.sampled_from([DOWN, UP, SAME, ANSWER, "a", "b c", "what?", "  ", "[L", "↓]"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_pieces, max_size=14).map(" ".join))
def test_strict_and_lenient_parsers_agree_on_arbitrary_text(text: str) -> None:
    lenient = parse_lenient(text)
    try:
        strict = parse(text)
    except QSParseError as err:
        assert not lenient.ok
        assert 0 <= err.position <= len(text)
        if err.token in RESERVED:
            assert text[err.position :].startswith(err.token)
    else:
        assert lenient.ok and lenient.tree == strict
    # whatever was recovered is a valid hierarchy
    if lenient.tree.root.summary:
        assert parse(linearize(lenient.tree)) == lenient.tree


# --------------------------------------------------------------------------- outline
def test_render_outline() -> None:
    assert render_outline(figure1()) == "\n".join(
        [
            "[1] Q: Q1",
            "    A: A1",
            "    [1.1] Q: Q1.1",
            "          A: A1.1",
            "    [1.2] Q: Q1.2",
            "          A: A1.2",
            "        [1.2.1] Q: Q1.2.1",
            "                A: A1.2.1",
        ]
    )
    long = QSTree(QSNode(None, "word " * 30, [QSNode("Why?", "because " * 12)]))
    lines = render_outline(long, width=40).splitlines()
    assert lines[0].startswith("[1] A: word") and all(len(line) <= 40 for line in lines)
    assert lines[1].startswith("       word")  # hanging indent under the text
    assert any(line.startswith("    [1.1] Q: Why?") for line in lines)


# --------------------------------------------------------------------------- hierarchy F1
def chain(*summaries: str) -> QSTree:
    """root -> child -> grandchild ... with the given summaries."""
    nodes = [QSNode(None if i == 0 else f"q{i}?", s) for i, s in enumerate(summaries)]
    for parent, child in zip(nodes, nodes[1:], strict=False):
        parent.children.append(child)
    return QSTree(nodes[0])


def star(root: str, *children: str) -> QSTree:
    return QSTree(QSNode(None, root, [QSNode(f"q{i}?", c) for i, c in enumerate(children, 1)]))


R, C, G = "a b c d", "e f g h", "i j k l"


def test_identical_hierarchies_score_one() -> None:
    for tree in (chain(R, C, G), star(R, C, G), chain(R, C, G, "m n", "o p q")):
        score = hierarchy_f1(tree, tree)
        assert (score.precision, score.recall, score.f1) == (1.0, 1.0, 1.0)
    # one-word summaries have no bigram: ROUGE-2 F is 0, so each match weighs (1 + 0 + 1 + 0) / 4
    one_word = star("alpha", "beta", "gamma")
    assert hierarchy_f1(one_word, one_word).f1 == pytest.approx(0.5)


def test_no_relations() -> None:
    root_only = star(R)
    assert hierarchy_f1(root_only, root_only).f1 == 1.0  # vacuous on both sides
    score = hierarchy_f1(root_only, chain(R, C))
    assert (score.precision, score.recall, score.f1) == (1.0, 0.0, 0.0)
    score = hierarchy_f1(chain(R, C), root_only)  # both pairs map to the one reference pair: no relation
    assert (score.precision, score.recall, score.f1) == (0.0, 1.0, 0.0)
    assert (score.generated_relations, score.reference_relations) == (1, 0)


def test_flattened_and_inverted_hierarchies() -> None:
    # flat: (R, C) and (R, G) both map to ancestor pairs of the chain; the chain's (C, G) is lost
    score = hierarchy_f1(star(R, C, G), chain(R, C, G))
    assert (score.precision, score.recall) == (1.0, 0.5) and score.f1 == pytest.approx(2 / 3)
    # child and grandchild swapped: (R, G) matches, (G, C) does not; (R, C) matches, (C, G) does not
    score = hierarchy_f1(chain(R, G, C), chain(R, C, G))
    assert (score.precision, score.recall, score.f1) == (0.5, 0.5, 0.5)
    # two generated pairs mapped to the same reference pair are no relation (the public script counts them)
    score = hierarchy_f1(chain(R, C, C), chain(R, C))
    assert (score.precision, score.recall) == (0.5, 1.0)


def test_match_weight_is_mean_of_rouge_f() -> None:
    # child "e f g x" vs "e f g h": ROUGE-1 F 3/4, ROUGE-2 F 2/3; root identical (1 + 1)
    weight = (2 + 3 / 4 + 2 / 3) / 4
    score = hierarchy_f1(chain(R, "e f g x"), chain(R, C))
    assert score.precision == pytest.approx(weight) and score.recall == pytest.approx(weight)
    assert score.f1 == pytest.approx(weight)


def test_evaluate_hierarchies_aggregates_and_bleu() -> None:
    generated = [star(R, C, G), chain(R, C)]
    references = [[chain(R, C, G)], [chain(R, C), star(R)]]
    report = evaluate_hierarchies(generated, references)
    assert report["hierarchy"]["precision"] == pytest.approx((1.0 + 1.0) / 2)
    assert report["hierarchy"]["recall"] == pytest.approx((0.5 + 1.0) / 2)
    assert report["hierarchy"]["f1"] == pytest.approx((2 / 3 + 1.0) / 2)
    mean = evaluate_hierarchies(generated, references, aggregate="mean")
    assert mean["hierarchy"]["f1"] == pytest.approx((2 / 3 + (1.0 + 0.0) / 2) / 2)
    expected = corpus_bleu(["q1? q2?", "q1?"], [["q1? q2?"], ["q1?", ""]])["score"]
    assert report["question_bleu4"]["score"] == pytest.approx(expected)
    assert report["question_bleu4"]["sentence_examples"] == 2
    assert report["pairs"] == {
        "prediction_mean": 2.5,
        "reference_mean": (3 + (2 + 1) / 2) / 2,
        "prediction_depth_mean": 1.0,
        "reference_depth_mean": (2 + (1 + 0) / 2) / 2,
    }
    assert report["summary_rouge"]["rouge1"] == pytest.approx(1.0)  # the same words, one pair per line


def test_parse_hierarchies_names_file_line_and_column() -> None:
    with pytest.raises(InputError, match=r"^p.txt:2:8: malformed QS hierarchy: \[L↓\] twice in a row"):
        parse_hierarchies(["A [L↓] Q [ANS] B", "A [L↓] [L↓] Q [ANS] B"], ["p.txt:1", "p.txt:2"])
    trees, counts = parse_hierarchies(["A [L↓] [L↓] Q [ANS] B", "A [L↓] Q B"], ["p:1", "p:2"], lenient=True)
    assert counts == {"malformed": 2, "dropped_pairs": 1, "repairs": 1}
    assert [len(t) for t in trees] == [2, 1]


# --------------------------------------------------------------------------- CLI
def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_cli_evaluate_qs(tmp_path: Path, capsys) -> None:
    refs = _write(tmp_path / "refs.txt", [linearize(chain(R, C, G)), linearize(chain(R, C))])
    preds = _write(tmp_path / "preds.txt", [linearize(star(R, C, G)), linearize(chain(R, C))])
    out = tmp_path / "scores.json"
    code = main(["evaluate", "-p", str(preds), "-r", str(refs), "--metrics", "qs", "--json", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0
    assert "hierarchy P / R / F1" in stdout and "question BLEU-4" in stdout
    report = json.loads(out.read_text())
    assert report["qs"]["hierarchy"]["f1"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert "hierarchy F1 (HIBRIDS)" in report["settings"]["qs"]
    assert "rouge" not in report  # only what was asked for


def test_cli_evaluate_qs_malformed_line_and_lenient(tmp_path: Path, capsys) -> None:
    refs = _write(tmp_path / "refs.txt", [linearize(chain(R, C)), linearize(chain(R, C))])
    preds = _write(tmp_path / "preds.txt", [linearize(chain(R, C)), "a b c d [L-] q? [ANS] e f g h"])
    out = tmp_path / "scores.json"
    code = main(["evaluate", "-p", str(preds), "-r", str(refs), "--metrics", "qs", "--json", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {preds}:2:9: malformed QS hierarchy: [L-] after the root")
    assert not out.exists()
    args = ["evaluate", "-p", str(preds), "-r", str(refs), "--metrics", "qs", "--qs-lenient"]
    assert main([*args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())["qs"]
    assert report["lenient"] == {"malformed": 1, "dropped_pairs": 0, "repairs": 1}
    assert report["hierarchy"]["f1"] == pytest.approx(1.0)  # [L-] after the root read as [L↓]
    # references are always parsed strictly
    bad_refs = _write(tmp_path / "bad_refs.txt", [linearize(chain(R, C)), "[L↓] q? [ANS] x"])
    code = main(["evaluate", "-p", str(preds), "-r", str(bad_refs), "--metrics", "qs", "--qs-lenient"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"{bad_refs}:2:1: malformed QS hierarchy" in err


# --------------------------------------------------------------------------- QMSum hierarchies
def _meeting_record() -> dict:
    turns = [{"speaker": "A" if i % 2 else "B", "content": f"Turn {i} here."} for i in range(30)]

    def query(text: str, answer: str, *spans: tuple[int, int]) -> dict:
        return {"query": text, "answer": answer, "relevant_text_span": [[str(a), str(b)] for a, b in spans]}

    return {
        "meeting_transcripts": turns,
        "topic_list": [
            {"topic": "Later", "relevant_text_span": [["20", "29"]]},
            {"topic": "Budget", "relevant_text_span": [["0", "9"]]},
            {"topic": "Design", "relevant_text_span": [["10", "19"]]},
        ],
        "general_query_list": [{"query": "Summarize the whole meeting.", "answer": "They met."}],
        "specific_query_list": [
            query("What did A think of the budget?", "A liked it.", (5, 9)),
            query("Summarize the budget discussion", "Money was tight.", (0, 10)),  # Jaccard 10/11
            query("What did B think of the budget?", "B disliked it.", (2, 4)),
            query("What did A say on design?", "A drew.", (12, 15)),  # Design has no covering query
            query("Anything across topics?", "Yes.", (8, 13)),  # 2/6 in Budget, 4/6 in Design
            query("What happened at the very end?", "Nothing.", (26, 35)),  # 4/10 in Later: no topic
            query("Unanswered?", " ", (0, 3)),  # no answer: not a pair
        ],
    }


def test_qmsum_hierarchy_construction() -> None:
    built = qmsum_hierarchy(_meeting_record(), "m.json", "ES0001a")
    assert linearize(built.tree) == (
        "Summarize the whole meeting. [ANS] They met. "
        "[L↓] Summarize the budget discussion [ANS] Money was tight. "
        "[L↓] What did B think of the budget? [ANS] B disliked it. "
        "[L-] What did A think of the budget? [ANS] A liked it. "
        "[L↑] Anything across topics? [ANS] Yes. "
        "[L-] What did A say on design? [ANS] A drew. "
        "[L-] What happened at the very end? [ANS] Nothing."
    )
    assert built.levels == ["meeting", "topic", "query", "query", "query", "query", "query"]
    assert built.turns[0] is None and built.turns[1] == set(range(11))
    assert built.stats == {
        "meetings": 1,
        "topics": 3,
        "topics_with_pair": 1,
        "queries_under_topics": 2,
        "queries_at_root": 3,
        "qs_pairs": 7,
        "queries_without_text": 1,
    }
    no_general = {**_meeting_record(), "general_query_list": []}
    with pytest.raises(InputError, match="m.json: no general query"):
        qmsum_hierarchy(no_general, "m.json", "ES0001a")


def test_qmsum_qs_corpora_and_convert(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "qmsum" / "train"
    folder.mkdir(parents=True)
    (folder / "ES0001a.json").write_text(json.dumps(_meeting_record()))
    hier = list(read_corpus("qmsum-qs", tmp_path / "qmsum", split="train"))
    assert [e.id for e in hier] == ["ES0001a#qs-hier", "ES0001a#qs-hier-1.1"]
    meeting, topic = hier
    assert meeting.instruction == "Summarize the whole meeting."
    assert parse(meeting.references[0]).root.question is None  # the root question is the input
    assert parse(meeting.metadata["hierarchy"]) == qmsum_hierarchy(_meeting_record(), "x", "x").tree
    assert topic.instruction == "Summarize the budget discussion"
    assert topic.references == [
        "Money was tight. [L↓] What did B think of the budget? [ANS] B disliked it. "
        "[L-] What did A think of the budget? [ANS] A liked it."
    ]
    assert [s.text for s in topic.document.sentences][-1] == "B: Turn 10 here."  # turns 0-10 only
    assert len(topic.document.sentences) == 11 and len(meeting.document.sentences) == 30
    assert [e.id for e in read_corpus("qmsum-qs", tmp_path / "qmsum", split="train", levels="meeting")] == [
        "ES0001a#qs-hier"
    ]
    childq = list(read_corpus("qmsum-qs-childq", tmp_path / "qmsum", split="train"))
    assert [e.id for e in childq] == ["ES0001a#qs-childq-1", "ES0001a#qs-childq-1.1"]
    assert split_questions(childq[1].references[0]) == [
        "What did B think of the budget?",
        "What did A think of the budget?",
    ]
    assert childq[1].instruction == "Summarize the budget discussion [ANS] Money was tight."
    out = tmp_path / "qs.jsonl"
    args = ["data", "convert", "--corpus", "qmsum-qs", "--input", str(tmp_path / "qmsum"), "--split", "train"]
    args.append("-o")
    assert main([*args, str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "wrote 2 examples" in stdout and "topics with pair: 1" in stdout
    assert [e.to_dict() for e in read_examples(out)] == [e.to_dict() for e in hier]
    with pytest.raises(InputError, match="levels must be one of"):
        list(read_corpus("qmsum-qs", tmp_path / "qmsum", split="train", levels="speaker"))


def test_qmsum_qs_on_real_data(shared_data: Path) -> None:
    folder = shared_data / "qmsum"
    # train: the hierarchies only (building every aligned document takes a while)
    totals: dict[str, int] = {}
    for path in sorted((folder / "train").glob("*.json")):
        record = json.loads(path.read_text())
        built = qmsum_hierarchy(record, str(path), path.stem)
        for key, value in built.stats.items():
            totals[key] = totals.get(key, 0) + value
        placed = built.stats["topics_with_pair"] + built.stats["queries_under_topics"]
        assert placed + built.stats["queries_at_root"] == len(record["specific_query_list"])  # each once
        assert parse(linearize(built.tree)) == built.tree
    assert (totals["meetings"], totals["qs_pairs"], totals["topics_with_pair"]) == (162, 1257, 340)
    # val: the examples, end to end
    stats: dict[str, int] = {}
    hier = list(read_corpus("qmsum-qs", folder, split="val", stats=stats))
    assert (stats["meetings"], len(hier), stats["qs_pairs"], stats["topics_with_pair"]) == (35, 96, 272, 70)
    assert sum(e.metadata["level"] == "meeting" for e in hier) == 35
    for example in hier:
        tree = parse(example.references[0])  # strict: every target is well-formed
        assert tree.root.question is None and tree.root.children
        assert linearize(tree) == example.references[0]
    childq = list(read_corpus("qmsum-qs-childq", folder, split="val"))
    assert len(childq) == 96 and all(split_questions(e.references[0]) for e in childq)


def test_summarize_outline_renders_a_generated_hierarchy(tmp_path, capsys) -> None:
    """``synopsis summarize --outline``: a model's linearised hierarchy shown as an indented outline."""
    from synopsis.cli import main

    generated = "The team chose a design. [L↓] Why? [ANS] It was cheaper. [L-] When? [ANS] In May."
    document = tmp_path / "doc.txt"
    document.write_text(generated)  # LEAD-10 returns the whole text: a stand-in for a model's output
    assert main(["summarize", str(document), "--method", "lead-10", "--outline"]) == 0
    out = capsys.readouterr().out
    assert "[1]" in out and "[1.1] Q: Why?" in out and "[1.2] Q: When?" in out
    document.write_text("The team chose a design. [L↓] [L↓] Why? [ANS] It was cheaper.")
    assert main(["summarize", str(document), "--method", "lead-10", "--outline"]) == 0
    captured = capsys.readouterr()
    assert "malformed generated hierarchy" in captured.err and "Q: Why?" in captured.out
