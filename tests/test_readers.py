"""Document and corpus readers: unit tests on small inputs, then every reader on the real shared data."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from synopsis.data.readers import CORPORA, DOCUMENT_FORMATS, detect_corpus, read_corpus, read_document
from synopsis.data.readers.base import NumberedTree, split_numbered_title
from synopsis.data.readers.cnn import split_story
from synopsis.document import Document, Section
from synopsis.errors import InputError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def outline(document: Document) -> list[tuple[int, str | None]]:
    """(depth, heading) of every non-root section in document order."""
    return [(s.depth, s.heading) for s in document.sections[1:]]


# --------------------------------------------------------------------------- single documents
def test_plain_text_paragraphs_and_real_sentence_splitting(tmp_path: Path) -> None:
    path = write(
        tmp_path / "note.txt",
        "Dr. Smith arrived at 3.5 p.m. today. He left.\n\n\nSecond para,\nwrapped line.\n",
    )
    document = read_document(path)
    assert document.id == "note"
    assert document.paragraphs == [
        ["Dr. Smith arrived at 3.5 p.m. today.", "He left."],
        ["Second para, wrapped line."],
    ]


def test_markdown_headings_build_the_tree(tmp_path: Path) -> None:
    text = (
        "# Report\n\nIntro, e.g. one sentence. Another one.\n\n"
        "## Methods\n\n- first *item*\n- second item\n\n```\n# a comment, not a heading\n```\n\n"
        "#### Jump\n\nDeep text.\n\n## Results\n\nSee [the table](t.html).\n"
    )
    document = read_document(write(tmp_path / "r.md", text))
    assert document.title == "Report"
    assert outline(document) == [(1, "Methods"), (2, "Jump"), (1, "Results")]
    assert document.root.paragraphs == [["Intro, e.g. one sentence.", "Another one."]]
    methods = document.sections[1]
    assert methods.paragraphs == [["first item"], ["second item"], ["# a comment, not a heading"]]
    assert document.sections[3].paragraphs == [["See the table."]]


def test_markdown_first_h1_is_a_section_when_there_are_several(tmp_path: Path) -> None:
    text = "# One\n\nText one.\n\n### Sub\n\nText sub.\n\n# Two\n\nText two.\n"
    document = read_document(write(tmp_path / "two.md", text))
    assert document.title is None
    assert outline(document) == [(1, "One"), (2, "Sub"), (1, "Two")]  # "###" nests directly under "#"


def test_markdown_text_before_the_first_h1_means_no_title(tmp_path: Path) -> None:
    document = read_document(write(tmp_path / "t.md", "Lead text.\n\n# Head\n\nBody.\n"))
    assert document.title is None
    assert outline(document) == [(1, "Head")]


def test_document_json_round_trips_losslessly(tmp_path: Path) -> None:
    root = Section(paragraphs=[["Root text."]])
    intro = root.add(Section("Intro", [["A.", "B."], ["C."]], number="1"))
    intro.add(Section("Detail", [["D."]], number="1.1"))
    root.add(Section(None, [["E."]]))
    original = Document(root, title="T", id="doc-1", metadata={"source": "test", "year": 2024})
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(original.to_dict()), encoding="utf-8")
    again = read_document(path)
    assert again.to_dict() == original.to_dict()
    path2 = tmp_path / "again.json"
    path2.write_text(json.dumps(again.to_dict()), encoding="utf-8")
    assert path2.read_text() == path.read_text()


def test_auto_format_sniffs_json_content_and_rejects_unknown_extensions(tmp_path: Path) -> None:
    meeting = {
        "meeting_transcripts": [{"speaker": "A", "content": "Hello there ."}],
        "topic_list": [],
        "general_query_list": [],
        "specific_query_list": [],
    }
    assert (
        read_document(write(tmp_path / "m.json", json.dumps(meeting))).sentences[0].text == "A: Hello there ."
    )
    cohan = {
        "article_id": "x1",
        "section_names": ["intro"],
        "sections": [["a b ."]],
        "abstract_text": ["<S> s </S>"],
    }
    assert outline(read_document(write(tmp_path / "c.json", json.dumps(cohan)))) == [(1, "intro")]
    with pytest.raises(InputError, match=r"data\.csv: cannot tell the format .*--format"):
        read_document(write(tmp_path / "data.csv", "a,b\n1,2\n"))
    with pytest.raises(InputError, match="JSONL corpus"):
        read_document(write(tmp_path / "c.jsonl", '{"a": 1}\n{"a": 2}\n'))
    assert (
        read_document(write(tmp_path / "README", "No extension here."), "auto").text == "No extension here."
    )
    with pytest.raises(InputError, match="unknown document format 'docx'"):
        read_document(tmp_path / "README", "docx")
    formats = {"text", "markdown", "rst", "json", "scisummnet", "story", "arxiv", "qmsum"}
    assert set(DOCUMENT_FORMATS) == formats


def test_a_50_mb_document_is_refused_quickly_with_the_size_and_the_option(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with open(path, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # sparse: no need to write 50 MB to disk
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        read_document(path)
    assert time.perf_counter() - start < 0.5
    message = str(err.value)
    assert (
        "huge.txt" in message and "50.0 MB" in message and "20 MB" in message and "--max-input-mb" in message
    )
    assert "\n" not in message


def test_a_document_just_under_the_limit_is_read(tmp_path: Path) -> None:
    sentences = [f"Sentence number {i} of the filler text." for i in range(11_500)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(Document.from_sentences(sentences).to_dict()), encoding="utf-8")
    assert 0.45 * 1024 * 1024 < path.stat().st_size < 0.5 * 1024 * 1024
    assert len(read_document(path, max_mb=0.5).sentences) == len(sentences)
    with pytest.raises(InputError, match="limit"):
        read_document(path, max_mb=0.45)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty"),
        (b"  \n\t\n  ", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("caf\u00e9 latin-1".encode("latin-1"), "not valid UTF-8"),
    ],
)
def test_bad_document_files_raise_one_line_errors(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=expected) as err:
        read_document(path)
    assert "bad.txt" in str(err.value) and "\n" not in str(err.value)


def test_missing_file_and_headings_without_text(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope.md: no such file"):
        read_document(tmp_path / "nope.md")
    with pytest.raises(InputError, match="no text found"):
        read_document(write(tmp_path / "h.md", "# Only\n\n## Headings\n"))


# --------------------------------------------------------------------------- section numbering
def test_split_numbered_title() -> None:
    assert split_numbered_title("2.1 Data") == ("2.1", "Data")
    assert split_numbered_title("2.1. Data") == ("2.1", "Data")
    assert split_numbered_title("2.") == ("2", None)
    assert split_numbered_title("Acknowledgments") == (None, "Acknowledgments")
    assert split_numbered_title("1998 was a year") == (None, "1998 was a year")  # not a section number
    assert split_numbered_title("") == (None, None)


def test_numbered_tree_nests_by_number_without_reordering() -> None:
    root = Section()
    tree = NumberedTree(root)
    for number in ["1", "2", "2.1", "2.1.1", "2.2", "3.1", "3", "3.1", None, "3.2"]:
        tree.add(Section(heading=f"s{number}", number=number))
    document = Document(root)
    assert [(s.depth, s.number) for s in document.sections[1:]] == [
        (1, "1"),
        (1, "2"),
        (2, "2.1"),
        (3, "2.1.1"),
        (2, "2.2"),
        (1, "3.1"),  # no open "3" yet: stays at the top
        (1, "3"),
        (2, "3.1"),
        (1, None),
        (1, "3.2"),  # "3" is closed by the unnumbered section; nesting under it would reorder the text
    ]


# --------------------------------------------------------------------------- corpus formats (synthetic)
SCISUMMNET_XML = """<PAPER>
  <S sid="0">A &amp;quot;Quoted&amp;quot; Title</S>
  <ABSTRACT><S sid="1">Abstract one.</S></ABSTRACT>
  <SECTION title="1 Introduction" number="1"><S sid="2">Intro.</S></SECTION>
  <SECTION title="2." number="2"><S sid="3">Two.</S></SECTION>
  <SECTION title="2.1 Detail" number="3"><S sid="4">Two one.</S><SUBSECTION>stray table</SUBSECTION></SECTION>
  <SECTION title="Conclusion. " number="4"><S sid="5">End.</S></SECTION>
</PAPER>"""


def test_scisummnet_xml_quirks(tmp_path: Path) -> None:
    document = read_document(write(tmp_path / "P00-0000.xml", SCISUMMNET_XML))
    assert document.id == "P00-0000"
    assert document.title == 'A "Quoted" Title'  # entities escaped twice in the corpus
    assert [(s.depth, s.number, s.heading) for s in document.sections[1:]] == [
        (1, None, "Abstract"),
        (1, "1", "Introduction"),
        (1, "2", None),
        (2, "2.1", "Detail"),
        (1, None, "Conclusion"),
    ]
    assert [s.text for s in document.sentences] == [
        "Abstract one.",
        "Intro.",
        "Two.",
        "Two one.",
        "stray table",
        "End.",
    ]


def test_scisummnet_text_after_a_nested_section_keeps_document_order(tmp_path: Path) -> None:
    xml = (
        '<PAPER><S sid="0">T</S><ABSTRACT><S>a1.</S><SECTION title="1 X"><S>x.</S></SECTION><S>a2.</S>'
        '</ABSTRACT><SECTION title="2 Y"><S>y.</S></SECTION></PAPER>'
    )
    document = read_document(write(tmp_path / "q.xml", xml))
    assert [s.text for s in document.sentences] == ["a1.", "x.", "a2.", "y."]
    assert outline(document) == [(1, "Abstract"), (2, "X"), (2, None), (1, "Y")]


def test_scisummnet_malformed_xml_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bad\.xml:2: malformed XML"):
        read_document(write(tmp_path / "bad.xml", "<PAPER>\n<S>unclosed</PAPER>"))
    with pytest.raises(InputError, match="expected <PAPER>"):
        read_document(write(tmp_path / "other.xml", "<html><p>x</p></html>"))


def _meeting(tmp_path: Path, name: str = "ES0001a") -> Path:
    turns = [f"Turn {i} here {{disfmarker}} ." for i in range(10)]
    record = {
        "meeting_transcripts": [
            {"speaker": "A" if i % 2 else "B", "content": t} for i, t in enumerate(turns)
        ],
        # Overlapping, unordered and gapped spans, as in the real data.
        "topic_list": [
            {"topic": "Later", "relevant_text_span": [["7", "8"]]},
            {"topic": "Main", "relevant_text_span": [["2", "6"]]},
            {"topic": "Inner", "relevant_text_span": [["4", "4"]]},
        ],
        "general_query_list": [{"query": "Summarize the meeting.", "answer": "They met."}],
        "specific_query_list": [
            {"query": "What about turn 4?", "answer": "It was inner.", "relevant_text_span": [["4", "5"]]},
            {"query": "And the end?", "answer": "It ended.", "relevant_text_span": [["8", "9"]]},
        ],
    }
    folder = tmp_path / "qmsum" / "train"
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder / f"{name}.json", json.dumps(record))


def test_qmsum_topics_become_sections_in_turn_order(tmp_path: Path) -> None:
    document = read_document(_meeting(tmp_path))
    assert document.root.paragraphs == [["B: Turn 0 here ."], ["A: Turn 1 here ."]]  # before any topic
    assert [(s.heading, len(s.paragraphs)) for s in document.sections[1:]] == [
        ("Main", 2),
        ("Inner", 1),  # a span inside another interrupts it
        ("Main", 2),
        ("Later", 2),
        (None, 1),  # turn 9 is in no topic, after the first topic: an untitled section
    ]
    assert [s.text for s in document.sentences][-1] == "A: Turn 9 here ."
    assert document.metadata == {"domain": "product"}


def test_qmsum_queries_become_instruction_examples(tmp_path: Path) -> None:
    _meeting(tmp_path)
    folder = tmp_path / "qmsum"
    examples = list(read_corpus("qmsum", folder, split="train"))
    assert [e.id for e in examples] == ["ES0001a#general-0", "ES0001a#specific-0", "ES0001a#specific-1"]
    assert examples[1].instruction == "What about turn 4?" and examples[1].references == ["It was inner."]
    assert examples[0].document is examples[1].document  # one meeting, parsed once
    general = list(read_corpus("qmsum", folder, split="train", queries="general"))
    assert [e.id for e in general] == ["ES0001a#general-0"]
    spans = list(read_corpus("qmsum", folder, split="train", queries="specific", relevant_span_only=True))
    assert [e.document.id for e in spans] == ["ES0001a#specific-0", "ES0001a#specific-1"]
    assert [[s.text for s in e.document.sentences] for e in spans] == [
        ["B: Turn 4 here .", "A: Turn 5 here ."],
        ["B: Turn 8 here .", "A: Turn 9 here ."],
    ]
    with pytest.raises(InputError, match="queries must be one of"):
        list(read_corpus("qmsum", folder, split="train", queries="some"))
    with pytest.raises(InputError, match="choose a split"):
        list(read_corpus("qmsum", folder))


def test_cnn_story_split() -> None:
    article, highlights = split_story("First para.\n\nSecond.\n\n@highlight\n\nOne\n\n@highlight\n\nTwo\n")
    assert article.split() == ["First", "para.", "Second."]
    assert highlights == ["One", "Two"]


def test_cnn_story_without_highlights_is_a_bad_record(tmp_path: Path) -> None:
    write(tmp_path / "a.story", "Text.\n\n@highlight\n\nHigh.\n")
    write(tmp_path / "b.story", "Text without a summary.\n")
    with pytest.raises(InputError, match=r"b\.story: no @highlight"):
        list(read_corpus("cnn", tmp_path))
    stats: dict[str, int] = {}
    examples = list(read_corpus("cnn", tmp_path, skip_bad_lines=True, stats=stats))
    assert [e.id for e in examples] == ["a"] and stats["skipped"] == 1


def test_generic_jsonl_column_mapping(tmp_path: Path) -> None:
    rows = [
        {
            "article": "One. Two.",
            "highlights": "H1",
            "alt": ["A1", "A2"],
            "key": 7,
            "q": "Focus?",
            "style": "news",
        },
        {"article": ["S1.", "S2."], "highlights": "H2", "alt": "A3", "key": 8, "q": "", "style": "blog"},
    ]
    path = write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    examples = list(
        read_corpus(
            "jsonl",
            path,
            text_column="article",
            summary_column=["highlights", "alt"],
            id_column="key",
            instruction_column="q",
            attribute_columns=["style"],
        )
    )
    assert [e.id for e in examples] == ["7", "8"]
    assert examples[0].references == ["H1", "A1", "A2"] and examples[1].references == ["H2", "A3"]
    assert examples[0].document.paragraphs == [["One.", "Two."]]
    assert examples[1].document.paragraphs == [["S1.", "S2."]]
    assert examples[0].instruction == "Focus?" and examples[1].instruction is None
    assert examples[1].attributes == {"style": "blog"}
    with pytest.raises(
        InputError, match=r"d\.jsonl:1: no column 'text' \(--text-column\); the record has: article"
    ):
        list(read_corpus("jsonl", path))


def test_generic_ids_do_not_shift_when_bad_lines_are_skipped(tmp_path: Path) -> None:
    lines = [
        json.dumps({"text": "One.", "summary": "S."}),
        "{broken",
        json.dumps({"text": "Two.", "summary": "T."}),
    ]
    path = write(tmp_path / "g.jsonl", "\n".join(lines) + "\n")
    assert [e.id for e in read_corpus("jsonl", path, skip_bad_lines=True)] == ["g-0", "g-2"]


def test_generic_id_field_is_used_by_default_and_references_can_be_optional(tmp_path: Path) -> None:
    lines = [json.dumps({"id": "doc-a", "text": "One."}), json.dumps({"id": " ", "text": "Two."})]
    path = write(tmp_path / "g.jsonl", "\n".join(lines) + "\n")
    examples = list(read_corpus("jsonl", path, summary_column=None))
    assert [e.id for e in examples] == ["doc-a", "g-1"]  # a blank id falls back to the position
    assert all(e.references == [] for e in examples)
    with pytest.raises(InputError, match=r"g\.jsonl:1: no column 'summary'"):
        list(read_corpus("jsonl", path))


def test_generic_csv_and_tsv(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", 'text,summary\n"Para one.\n\nPara two.",Sum\nx,y,z\nOnly text.,S2\n')
    with pytest.raises(InputError, match=r"d\.csv:5: expected 2 fields as in the header, found 3"):
        list(read_corpus("csv", path))
    stats: dict[str, int] = {}
    examples = list(read_corpus("csv", path, skip_bad_lines=True, stats=stats))
    assert stats["skipped"] == 1
    assert [e.id for e in examples] == ["d-0", "d-2"]
    assert examples[0].document.paragraphs == [["Para one."], ["Para two."]]
    tsv = write(tmp_path / "d.tsv", "doc\tref\nSome text.\tA ref.\n")
    (example,) = read_corpus("csv", tsv, text_column="doc", summary_column="ref")
    assert example.references == ["A ref."]


def test_unknown_corpus_and_options_are_errors_at_call_time(tmp_path: Path) -> None:
    path = write(tmp_path / "x.jsonl", "{}\n")
    with pytest.raises(InputError, match="unknown corpus 'wiki'"):
        read_corpus("wiki", path)
    with pytest.raises(InputError, match="corpus 'scitldr' has no option 'text_column'"):
        read_corpus("scitldr", path, text_column="x")
    with pytest.raises(InputError, match="no such file"):
        read_corpus("scitldr", tmp_path / "missing.jsonl")
    assert {"synopsis", "scitldr", "scisummnet", "qmsum", "cnn", "arxiv", "pubmed", "jsonl", "csv"} <= set(
        CORPORA
    )


def test_malformed_jsonl_line_is_named_or_skipped(tmp_path: Path) -> None:
    good = {"source": ["A."], "target": ["T."], "paper_id": "p1"}
    lines = [json.dumps(good), '{"source": ["B."], "target": [', json.dumps({**good, "paper_id": "p3"})]
    path = write(tmp_path / "s.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"s\.jsonl:2: malformed JSON"):
        list(read_corpus("scitldr", path))
    stats: dict[str, int] = {}
    assert [e.id for e in read_corpus("scitldr", path, skip_bad_lines=True, stats=stats)] == ["p1", "p3"]
    assert stats["skipped"] == 1
    missing = write(tmp_path / "m.jsonl", json.dumps({"source": ["A."], "paper_id": "p"}) + "\n")
    with pytest.raises(InputError, match=r"m\.jsonl:1: missing field 'target'"):
        list(read_corpus("scitldr", missing))


# --------------------------------------------------------------------------- the real shared data
@pytest.mark.parametrize(("split", "count"), [("dev", 619), ("train", 1992)])
def test_scitldr(shared_data: Path, split: str, count: int) -> None:
    examples = list(read_corpus("scitldr", shared_data / "scitldr", split=split))
    assert len(examples) == count
    raw = json.loads((shared_data / "scitldr" / f"{split}.jsonl").read_text().splitlines()[0])
    first = examples[0]
    assert first.id == raw["paper_id"] and first.document.title == raw["title"]
    assert [s.text for s in first.document.sentences] == raw["source"]  # kept, not re-split
    assert first.references == raw["target"]


def test_generic_jsonl_mapping_reproduces_the_scitldr_reader(shared_data: Path) -> None:
    path = shared_data / "scitldr" / "dev.jsonl"
    mapped = read_corpus(
        "jsonl",
        path,
        text_column="source",
        summary_column="target",
        id_column="paper_id",
        title_column="title",
    )
    direct = read_corpus("scitldr", path)
    assert [e.to_dict() for e in mapped] == [e.to_dict() for e in direct]


@pytest.mark.slow
def test_scisummnet_all_papers(shared_data: Path) -> None:
    folder = shared_data / "scisummnet"
    stats: dict[str, int] = {}
    examples = {e.id: e for e in read_corpus("scisummnet", folder, stats=stats)}
    papers = [p for p in folder.iterdir() if p.is_dir()]
    assert len(examples) + stats["no_reference"] == len(papers) == 978
    assert stats["no_reference"] == 4  # summaries holding only the title line
    paper = examples["N09-1009"]
    assert paper.document.title == (
        "Shared Logistic Normal Distributions for Soft Parameter Tying in Unsupervised Grammar Induction"
    )
    by_number = {s.number: s for s in paper.document.sections if s.number}
    assert (
        by_number["2.1"].parent is by_number["2"]
        and by_number["2.1"].heading == "Dependency Model with Valence"
    )
    assert by_number["2"].depth == 1 and by_number["2.1"].depth == 2
    assert paper.document.sections[1].heading == "Abstract"
    summary = (folder / "N09-1009" / "summary" / "N09-1009.scisummnet_human.txt").read_text().splitlines()
    assert paper.references == ["\n".join(line.strip() for line in summary[1:] if line.strip())]
    xml = (folder / "N09-1009" / "Reference_XML" / "N09-1009.xml").read_text()
    assert len(paper.document.sentences) == xml.count("<S ") - 1  # every <S> but the title


def test_qmsum_val_counts_match_the_raw_query_lists(shared_data: Path) -> None:
    folder = shared_data / "qmsum"
    files = sorted((folder / "val").glob("*.json"))
    raw = [json.loads(f.read_text()) for f in files]
    expected = sum(len(r["general_query_list"]) + len(r["specific_query_list"]) for r in raw)
    examples = list(read_corpus("qmsum", folder, split="dev"))  # "dev" finds QMSum's "val"
    assert len(examples) == expected
    first = raw[0]
    meeting = files[0].stem
    specific = [e for e in examples if e.id.startswith(f"{meeting}#specific-")]
    assert [e.instruction for e in specific] == [q["query"].strip() for q in first["specific_query_list"]]
    document = specific[0].document
    assert {s.heading for s in document.sections[1:]} - {None} == {t["topic"] for t in first["topic_list"]}
    turns = [t for t in first["meeting_transcripts"] if t["content"].replace("{disfmarker}", "").strip()]
    assert len(document.paragraphs) <= len(turns) and document.paragraphs[0][0].startswith(
        turns[0]["speaker"]
    )


def test_cnn_stories(shared_data: Path) -> None:
    folder = shared_data / "cnndm_stories"
    examples = list(read_corpus("cnn", folder))
    assert len(examples) == 20
    for example in examples:
        raw = (folder / f"{example.id}.story").read_text()
        assert example.references[0].count("\n") + 1 == raw.count("@highlight")
        assert not example.document.is_empty()


@pytest.mark.parametrize("name", ["arxiv", "pubmed"])
def test_arxiv_pubmed(shared_data: Path, name: str) -> None:
    path = shared_data / "arxiv_pubmed_sample" / f"{name}.jsonl"
    examples = list(read_corpus(name, path))
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(examples) == len(raw) == 6
    for example, record in zip(examples, raw, strict=True):
        assert example.id == record["article_id"]
        assert len(example.document.sections) - 1 == len(record["section_names"])
        assert "<S>" not in example.references[0]
        assert example.references[0].count("\n") + 1 == len(record["abstract_text"])
    if name == "arxiv":  # "[sec:introduction]introduction" -> "introduction"
        assert examples[1].document.sections[1].heading == "introduction"


def test_read_document_on_real_files(shared_data: Path) -> None:
    story = next((shared_data / "cnndm_stories").glob("*.story"))
    assert "@highlight" not in read_document(story).text
    assert read_document(shared_data / "qmsum" / "val" / "Bed002.json").id == "Bed002"
    assert read_document(
        shared_data / "scisummnet" / "A00-1031" / "Reference_XML" / "A00-1031.xml"
    ).title == ("TnT - A Statistical Part-Of-Speech Tagger")


def test_detect_corpus_on_real_data(shared_data: Path) -> None:
    assert detect_corpus(shared_data / "scisummnet") == "scisummnet"
    assert detect_corpus(shared_data / "cnndm_stories") == "cnn"
    assert detect_corpus(shared_data / "qmsum") == "qmsum"
    assert detect_corpus(shared_data / "scitldr" / "dev.jsonl") == "scitldr"
    assert detect_corpus(shared_data / "arxiv_pubmed_sample" / "pubmed.jsonl") == "arxiv"


# --------------------------------------------------------------------------- plain-text structure (issue 48)
GUIDE = """\
Widget Guide
============

Widget draws charts in a terminal. It reads CSV files.

Installing
----------

Install it with pip before anything else.

    $ pip install widget
    Successfully installed widget-1.0

Building from source
--------------------

Compile the extension first. The compiler may warn:

make const
const.cc: In function 'int main()':
const.cc:7: error: invalid conversion from 'char**' to 'const char**'

Options
~~~~~~~

Call widget with a file name and it draws the chart.
"""

LICENCE = """\
                         WIDGET PUBLIC LICENSE

  This licence says what you may do with the widget.

                         TERMS AND CONDITIONS

  1. Definitions.

  "Widget" means the software and its documentation.

  2. Scope

  The licence covers every copy of the widget.

  2.1 Copies

  You may copy the widget for anyone.

  3. Grant of Licence. You may use the widget for any purpose.
"""


def test_plain_text_underlined_headings_build_the_tree(tmp_path: Path) -> None:
    document = read_document(write(tmp_path / "guide.txt", GUIDE))
    assert document.title == "Widget Guide"
    # "=" only for the title; then "-", then "~": a heading's level is the order its style first appears
    assert outline(document) == [(1, "Installing"), (1, "Building from source"), (2, "Options")]


def test_plain_text_console_and_compiler_output_are_code_never_summarized(tmp_path: Path) -> None:
    text = GUIDE
    document = read_document(write(tmp_path / "guide.txt", text))
    code = [b for b in document.blocks if b.kind == "code"]
    assert any("$ pip install widget" in b.text and "Successfully" in b.text for b in code)
    assert any("const.cc: In function" in b.text for b in code)
    assert not any("const.cc" in s.text or "pip install widget" in s.text for s in document.sentences)
    for block in code:  # the span is the block's own characters
        assert text[block.start : block.end].strip() == block.text.strip()
    for sentence in document.sentences:
        assert " ".join(text[sentence.start : sentence.end].split()) == sentence.text


def test_plain_text_numbered_and_capital_headings_build_the_tree(tmp_path: Path) -> None:
    document = read_document(write(tmp_path / "LICENSE", LICENCE), "text")
    assert document.title == "WIDGET PUBLIC LICENSE"
    assert outline(document) == [
        (1, "TERMS AND CONDITIONS"),
        (2, "Definitions."),
        (2, "Scope"),
        (3, "Copies"),
        (2, "Grant of Licence"),
    ]
    assert [s.number for s in document.sections[2:]] == ["1", "2", "2.1", "3"]
    grant = document.sections[-1]
    clause = [s.text for s in document.sentences if s.section is grant]
    assert clause == ["You may use the widget for any purpose."]


def test_a_numbered_list_is_not_headings(tmp_path: Path) -> None:
    document = read_document(write(tmp_path / "steps.txt", "Do this:\n\n1. Open the lid.\n2. Close it.\n"))
    assert outline(document) == []
    text = "Do this first.\n\n1. Open the lid\n\nThen wait.\n"  # one numbered line alone: an item
    document = read_document(write(tmp_path / "one.txt", text))
    assert outline(document) == []
    (item,) = [b for b in document.blocks if b.kind == "list"]
    assert (item.text, text[item.start : item.end]) == ("Open the lid", "Open the lid")


def test_a_txt_is_markdown_only_when_its_hash_lines_behave_like_headings(tmp_path: Path) -> None:
    from synopsis.data.readers import sniff_format

    comments = "The standard says:\n\n# A conversion can add cv-qualifiers\n# at levels beyond the first.\n"
    assert sniff_format(comments, tmp_path / "README.Bugs.txt") == "text"
    assert sniff_format(comments) == "text"  # pasted, the same rule
    assert sniff_format("Intro.\n\n# Usage\n\nRun it.\n", tmp_path / "notes.txt") == "markdown"
    assert sniff_format(GUIDE, tmp_path / "guide.txt") == "text"  # underlines alone: the plain-text reader
