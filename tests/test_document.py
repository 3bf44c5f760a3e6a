"""Document model, sentence splitting and the HIBRIDS tree relations on hand-checked trees."""

from __future__ import annotations

import numpy as np
import pytest

from synopsis.document import Document, Section
from synopsis.errors import InputError
from synopsis.text import split_paragraphs, split_sentences


def _tree() -> Document:
    # root(0) -> A(1) -> A.1(2), A.2(3) -> A.2.1(4); B(5) -> B.1(6)
    a21 = Section("A.2.1", [["s5."]])
    a = Section("A", [["s0."]], [Section("A.1", [["s1.", "s2."]]), Section("A.2", [["s3."], ["s4."]], [a21])])
    b = Section("B", [["s6."]], [Section("B.1", [["s7."]])])
    return Document(Section(None, [], [a, b]), title="T")


def test_preorder_depths_and_sentence_positions() -> None:
    doc = _tree()
    assert [s.heading for s in doc.sections] == [None, "A", "A.1", "A.2", "A.2.1", "B", "B.1"]
    assert [s.depth for s in doc.sections] == [0, 1, 2, 2, 3, 1, 2]
    assert [s.text for s in doc.sentences] == [f"s{i}." for i in range(8)]
    s4 = doc.sentences[4]
    assert (s4.section.heading, s4.paragraph, s4.depth, s4.index) == ("A.2", 1, 2, 4)
    assert doc.max_depth == 3


# (x, y, PathLen, LvlDiff) checked by hand on the tree above.
HAND_CHECKED = [
    ("A", "A", 0, 0),
    ("A", "A.1", 1, 1),
    ("A.1", "A", -1, -1),
    ("A.1", "A.2", 2, 0),
    ("A.1", "A.2.1", 3, 1),
    ("A.2.1", "A.1", -3, -1),
    ("A.2.1", "B.1", 5, -1),
    ("B.1", "A.2.1", -5, 1),
    ("A", "B", 2, 0),
    ("A.2.1", "B", 4, -2),
    (None, "A.2.1", 3, 3),
]


@pytest.mark.parametrize("x,y,path,level", HAND_CHECKED)
def test_tree_relations_hand_checked(x: str | None, y: str, path: int, level: int) -> None:
    doc = _tree()
    by_heading = {s.heading: s for s in doc.sections}
    paths, levels = doc.tree_relations()
    i, j = by_heading[x].index, by_heading[y].index
    assert (paths[i, j], levels[i, j]) == (path, level)
    assert doc.relation(by_heading[x], by_heading[y]) == (path, level)


def test_tree_relations_matrix_agrees_with_pairwise_walk_and_antisymmetry() -> None:
    doc = _tree()
    paths, levels = doc.tree_relations()
    for x in doc.sections:
        for y in doc.sections:
            assert (paths[x.index, y.index], levels[x.index, y.index]) == doc.relation(x, y)
    np.testing.assert_array_equal(paths, -paths.T)
    np.testing.assert_array_equal(levels, -levels.T)


def test_sentence_relation_uses_its_section() -> None:
    doc = _tree()
    assert doc.relation(doc.sentences[1], doc.sentences[5]) == (3, 1)
    assert doc.relation(doc.sentences[1], doc.sentences[2]) == (0, 0)


def test_deep_tree_is_fast_and_correct() -> None:
    root = Section()
    node = root
    for depth in range(300):  # a chain: distance between depth a and b is |a - b|
        node = node.add(Section(f"d{depth}", [[f"sentence {depth}."]]))
    doc = Document(root)
    paths, levels = doc.tree_relations()
    idx = np.arange(len(doc.sections))
    np.testing.assert_array_equal(paths, idx[None, :] - idx[:, None])
    np.testing.assert_array_equal(levels, idx[None, :] - idx[:, None])


def test_json_round_trip_is_lossless() -> None:
    doc = _tree()
    doc.id, doc.metadata = "d1", {"source": "hand"}
    doc.sections[2].number = "1.1"
    again = Document.from_dict(doc.to_dict())
    assert again.to_dict() == doc.to_dict()
    assert [s.text for s in again.sentences] == [s.text for s in doc.sentences]


def test_from_dict_rejects_bad_fields() -> None:
    with pytest.raises(InputError, match="paragraphs"):
        Document.from_dict({"paragraphs": "not a list"})
    with pytest.raises(InputError, match=r"sections\[0\]\.heading"):
        Document.from_dict({"sections": [{"heading": 3}]})


def test_sentence_splitter_handles_abbreviations_and_decimals() -> None:
    text = "We use e.g. BERT on U.S. data. The value is 3.14 in Fig. 2 of Smith et al. (2020). It works!"
    assert split_sentences(text) == [
        "We use e.g. BERT on U.S. data.",
        "The value is 3.14 in Fig. 2 of Smith et al. (2020).",
        "It works!",
    ]


def test_plain_text_paragraphs() -> None:
    doc = Document.from_text("First para. Still first,\nwrapped line.\n\n\nSecond para.")
    assert doc.paragraphs == [["First para.", "Still first, wrapped line."], ["Second para."]]
    assert split_paragraphs("  \n \n") == []
