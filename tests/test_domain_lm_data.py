"""Domain-LM corpora: MASC reader on the real zip, JSONL corpora, domain grids, vocabulary, BPTT batching."""

from __future__ import annotations

import json
import zipfile
from collections import Counter

import pytest
import torch

from synopsis.data.example import Example
from synopsis.data.lm_corpus import (
    EOS,
    UNK,
    AttributedDocument,
    DomainSpec,
    TokenStream,
    batchify,
    bptt_windows,
    build_vocabulary,
    check_grid,
    read_attributed_documents,
    read_masc,
    select_domains,
    split_train_dev,
)
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.experiments.domain_lm import masc_grid
from synopsis.vocab import LM_SPECIALS, Vocab


def grid(*cells: tuple[str, str]) -> list[DomainSpec]:
    return [DomainSpec({"style": s, "topic": t}) for s, t in cells]


def doc(doc_id: str, style: str, topic: str, lines: list[str]) -> AttributedDocument:
    return AttributedDocument(doc_id, {"style": style, "topic": topic}, [line.split() for line in lines])


FULL = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]


# ------------------------------------------------------------------------------------------------ MASC


def test_masc_reader_counts_on_the_real_zip(shared_data) -> None:
    docs = read_masc(shared_data / "masc" / "masc_tagged.zip")
    assert len(docs) == 389  # the 392 files minus 3 that categories.txt does not list
    genres = Counter(d.attributes["genre"] for d in docs)
    assert genres["spam"] == 96 and genres["newspaper"] == 52 and genres["blog"] == 21
    assert Counter(d.attributes["mode"] for d in docs) == {"written": 374, "spoken": 15}
    assert 550_000 < sum(d.num_tokens for d in docs) < 650_000
    court = next(d for d in docs if d.id == "spoken/Day3PMSession.txt")
    assert court.lines[0][:4] == ["in", "the", "united", "states"]  # POS tags stripped, lowercased
    assert not any(
        "_" in w and w.rsplit("_", 1)[1].isupper() for d in docs[:20] for line in d.lines for w in line
    )


def test_masc_grid_is_balanced(shared_data) -> None:
    docs = read_masc(shared_data / "masc" / "masc_tagged.zip")
    domains = select_domains(docs, masc_grid(), max_tokens=29_000)
    assert list(domains) == [spec.name for spec in masc_grid()]
    sizes = {name: sum(d.num_tokens for d in ds) for name, ds in domains.items()}
    assert all(28_900 <= size <= 29_050 for size in sizes.values()), sizes
    assert len(domains["style=spoken, topic=everyday"]) == 11
    assert all(
        d.attributes == {"style": "written", "topic": "everyday"}
        for d in domains["style=written, topic=everyday"]
    )


def test_bad_corpus_files(tmp_path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_attributed_documents(tmp_path / "missing.zip")
    fake = tmp_path / "fake.zip"
    fake.write_text("not a zip")
    with pytest.raises(InputError, match="cannot read as a zip"):
        read_attributed_documents(fake)
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("a.txt", "hello_UH")
    with pytest.raises(InputError, match="no categories.txt"):
        read_attributed_documents(other)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a b", "attributes": {"style": "s"}}\n{"text": oops}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: malformed JSON"):
        read_attributed_documents(bad)
    bad.write_text('{"text": "a b", "attributes": {"style": 3}}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:1: field 'attributes'"):
        read_attributed_documents(bad)
    bad.write_text('{"body": "a b"}\n')
    with pytest.raises(InputError, match="expected a field 'text'"):
        read_attributed_documents(bad)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError, match="binary"):
        read_attributed_documents(binary)


def test_jsonl_corpus_text_and_example_records(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    example = Example(
        "e1", Document.from_sentences(["One sentence.", "Two here."]), attributes={"style": "b"}
    )
    rows = [
        {"id": "t1", "text": "Hello world.\nSecond line", "attributes": {"style": "a"}},
        example.to_dict(),
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    docs = read_attributed_documents(path)
    assert docs[0].lines == [["hello", "world", "."], ["second", "line"]]
    assert docs[0].attributes == {"style": "a"}
    assert docs[1].id == "e1" and docs[1].attributes == {"style": "b"} and len(docs[1].lines) == 2


# ----------------------------------------------------------------------------------------------- grids


def test_grid_missing_domain_and_other_grid_errors() -> None:
    assert check_grid(grid(*FULL)) == ["style", "topic"]
    with pytest.raises(InputError, match="missing domain style=b, topic=y"):
        check_grid(grid(*FULL[:3]))
    with pytest.raises(InputError, match="appears twice"):
        check_grid(grid(*FULL, ("a", "x")))
    with pytest.raises(InputError, match="only one value"):
        check_grid(grid(("a", "x"), ("a", "y")))
    with pytest.raises(InputError, match="has attributes"):
        check_grid([*grid(*FULL[:3]), DomainSpec({"style": "b"})])


def test_empty_domain_is_an_error() -> None:
    docs = [doc(f"{s}{t}", s, t, ["w w w"]) for s, t in FULL[:3]]
    with pytest.raises(InputError, match="domain style=b, topic=y is empty"):
        select_domains(docs, grid(*FULL))
    docs.append(doc("by", "b", "y", []))  # a document with no text does not make a domain non-empty
    with pytest.raises(InputError, match="is empty"):
        select_domains(docs, grid(*FULL))


def test_selector_relabels_and_balances() -> None:
    docs = [
        AttributedDocument("d1", {"genre": "g1"}, [["w"] * 9] * 10),  # 100 tokens
        AttributedDocument("d2", {"genre": "g2"}, [["w"] * 9] * 30),  # 300 tokens
        AttributedDocument("d3", {"genre": "g3"}, [["w"] * 4] * 10),
        AttributedDocument("d4", {"genre": "g4"}, [["w"] * 4] * 10),
        AttributedDocument("d5", {"genre": "g5"}, [["w"] * 4] * 10),
    ]
    specs = [
        DomainSpec({"style": "a", "topic": "x"}, {"genre": ["g1", "g2"]}),
        DomainSpec({"style": "a", "topic": "y"}, {"genre": ["g3"]}),
        DomainSpec({"style": "b", "topic": "x"}, {"genre": ["g4"]}),
        DomainSpec({"style": "b", "topic": "y"}, {"genre": ["g5"]}),
    ]
    domains = select_domains(docs, specs, max_tokens=200)
    ax = domains["style=a, topic=x"]
    assert [d.num_tokens for d in ax] == [50, 150]  # both documents keep the same share
    assert ax[0].attributes == {"style": "a", "topic": "x"}
    assert sum(d.num_tokens for d in domains["style=b, topic=y"]) == 50  # smaller domains untouched


def test_train_dev_split_is_ninety_ten_by_lines() -> None:
    docs = [
        doc("d1", "a", "x", [f"l{i}" for i in range(12)]),
        doc("d2", "a", "x", [f"m{i}" for i in range(8)]),
    ]
    train, dev = split_train_dev(docs, 0.1)
    assert sum(len(d.lines) for d in train) == 18 and [line for d in dev for line in d.lines] == [
        ["m6"],
        ["m7"],
    ]


# ------------------------------------------------------------------------------------- vocab & batching


def test_vocabulary_min_count_and_specials(tmp_path) -> None:
    docs = [doc("d", "a", "x", ["a a a b b c", "a b"])]
    vocab = build_vocabulary(docs, min_count=3)
    assert vocab.itos == [UNK, EOS, "a", "b"]
    assert vocab.encode(["a", "c", "zzz"]) == [vocab.stoi["a"], vocab.unk_id, vocab.unk_id, vocab.eos_id]
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").itos == vocab.itos
    (tmp_path / "bad.json").write_text('{"words": []}')
    with pytest.raises(InputError, match="not a vocabulary"):
        Vocab.load(tmp_path / "bad.json")


def test_stream_groups_and_bptt_windows() -> None:
    docs = [
        doc("d1", "a", "x", ["w1 w2", "w3"]),
        doc("d2", "b", "y", ["w4 w5 w6"]),
        doc("d3", "a", "x", ["w7"]),
    ]
    vocab = Vocab.from_words([f"w{i}" for i in range(1, 8)], LM_SPECIALS)
    stream = TokenStream.from_documents(docs, vocab)
    assert len(stream) == 2 + 1 + 1 + 1 + 3 + 1 + 1 + 1
    assert stream.attribute_sets == [{"style": "a", "topic": "x"}, {"style": "b", "topic": "y"}]
    assert stream.groups.tolist() == [0] * 5 + [1] * 4 + [0] * 2
    ids, groups = batchify(stream, 2)
    assert ids.shape == (2, 5)
    windows = list(bptt_windows(ids, groups, 3))
    assert [w[0].shape[1] for w in windows] == [3, 1]
    for inputs, targets, _ in windows:
        assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one
    assert torch.equal(torch.cat([w[1] for w in windows], 1), ids[:, 1:])
    with pytest.raises(InputError, match="too few"):
        batchify(stream, 8)
