"""InstructSum data: title clusters, the Levenshtein filter, cumulative instructions, QMSum queries."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from synopsis.cli import main
from synopsis.data.example import read_examples
from synopsis.data.instructsum import (
    Annotation,
    Article,
    BuildStats,
    Cluster,
    build_clusters,
    cluster_titles,
    cumulative_examples,
    levenshtein_filter,
    qmsum_instruction_examples,
    read_annotations,
    read_articles,
    split_clusters,
    word_levenshtein,
)
from synopsis.document import Document
from synopsis.errors import InputError

CITIES = ["Rio", "London", "Beijing", "Athens", "Sydney", "Atlanta", "Seoul"]


def lead(year: int, city: str) -> str:
    return (
        f"The {year} Summer Olympics were an international multi-sport event held in {city}. "
        f"More than ten thousand athletes took part in the games. "
        f"The games opened in August {year} and lasted sixteen days."
    )


def article(
    title: str, text: str = "Lead", source: str = "Some history. More facts.", **kw: object
) -> Article:
    return Article(title, title, text, Document.from_text(source, title=title), **kw)


def olympics(n: int = 6, odd_one: bool = True) -> list[dict[str, object]]:
    """``n`` Summer Olympics articles with similar leads, plus one with an unrelated lead."""
    records = []
    for i in range(n):
        year = 1988 + 4 * i
        records.append(
            {
                "id": f"oly{year}",
                "title": f"{year} Summer Olympics",
                "lead": lead(year, CITIES[i % len(CITIES)]),
                "sections": [{"heading": "Venues", "text": f"Venues in {CITIES[i % len(CITIES)]}.\n\nMore."}],
                "categories": ["Culture/Sports"] + (["Geography/Regions"] if i % 2 else []),
            }
        )
    if odd_one:
        records.append(
            {
                "id": "oly2030",
                "title": "2030 Summer Olympics",
                "lead": "Bids for this event are being prepared by several cities right now.",
                "text": "Bidding process.",
            }
        )
    return records


def write_lines(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- Levenshtein
def reference_levenshtein(a: list[str], b: list[str]) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def test_word_levenshtein_equals_the_dynamic_programme() -> None:
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        assert word_levenshtein(a, b) == reference_levenshtein(a, b)
    assert word_levenshtein("the cat sat".split(), "the dog sat down".split()) == 2


def test_levenshtein_filter_drops_targets_far_from_all_others() -> None:
    # 10-word targets: distance 6 < 0.7 x 10 keeps, distance 7 (= 0.7 x 10) drops
    base = "a b c d e f g h i j".split()
    near = base[:4] + list("uvwxyz")  # 6 substitutions from base
    far = base[:3] + list("tuvwxyz")  # 7 from base
    cluster = Cluster("c0", "*", [article(f"t{i}", " ".join(w)) for i, w in enumerate([base, near, far])])
    assert word_levenshtein(base, near) == 6 and word_levenshtein(base, far) == 7
    assert word_levenshtein(near, far) == 1  # far is close to near: kept
    kept, dropped = levenshtein_filter(cluster)
    assert [a.lead for a in kept] == [" ".join(w) for w in (base, near, far)] and not dropped
    lone = base[:3] + list("QRSTUVW")
    cluster = Cluster("c1", "*", [article("t0", " ".join(base)), article("t1", " ".join(lone))])
    assert word_levenshtein(base, [w.lower() for w in lone]) == 7
    kept, dropped = levenshtein_filter(cluster)
    assert not kept and len(dropped) == 2  # 7 >= 0.7 x 10 for both


# --------------------------------------------------------------------------------------------- clusters
def test_titles_cluster_when_they_differ_in_exactly_one_word() -> None:
    titles = [
        "2012 Summer Olympics",
        "2016 Summer Olympics",
        "2020 Summer Olympics",
        "2016 Winter Olympics",  # pattern "2016 * olympics" loses 2016 Summer to the larger cluster
        "2016 Summer Paralympics Games",  # other length
        "Olympics",  # too short
        "Summer",
        "2020 summer olympics",  # duplicate of a title (case-insensitive)
        "1900 Winter Games",  # two words differ from the others
        "Geography of France",
        "Geography of Spain",  # the last word differs
    ]
    clusters = cluster_titles([article(t) for t in titles])
    assert [(c.pattern, [a.title for a in c.articles]) for c in clusters] == [
        ("* summer olympics", ["2012 Summer Olympics", "2016 Summer Olympics", "2020 Summer Olympics"]),
        ("geography of *", ["Geography of France", "Geography of Spain"]),
    ]


def test_build_clusters_counts_every_stage() -> None:
    articles = [article(f"{1988 + 4 * i} Summer Olympics", lead(1988 + 4 * i, CITIES[i])) for i in range(5)]
    articles.append(article("2030 Summer Olympics", "Bids are being prepared by several cities right now."))
    articles += [article(f"{y} Winter Games", lead(y, "Oslo")) for y in (1994, 1998, 2002, 2006)]  # 4: small
    stats = BuildStats()
    clusters = build_clusters(articles, stats)
    assert [len(c.articles) for c in clusters] == [5]
    assert stats.counts == {
        "articles_usable": 10,
        "duplicate_titles": 0,
        "titles_too_short": 0,
        "title_clusters": 2,
        "articles_in_title_clusters": 10,
        "targets_dropped_by_levenshtein": 1,
        "clusters_dropped_small": 1,
        "articles_in_dropped_small_clusters": 4,
        "clusters": 1,
        "articles_in_clusters": 5,
    }
    assert "2030 Summer Olympics" not in [a.title for a in clusters[0].articles]


def test_split_by_category_keeps_test_instructions_unseen() -> None:
    geo = [article(f"g{i} x", categories=["Geography/Regions"]) for i in range(2)]
    other = [article(f"o{i} y", categories=["Culture/Sports"]) for i in range(2)]
    clusters = [Cluster(f"c{i}", "*", [a]) for i, a in enumerate(geo + other)] + [
        Cluster("c9", "*", [other[0], geo[0]])
    ]
    split_clusters(clusters, "Geography", dev_clusters=1, seed=0)
    assert [c.split for c in clusters[2:4]] == ["test", "test"]
    assert sorted(c.split for c in (clusters[0], clusters[1], clusters[4])) == ["dev", "train", "train"]


def test_split_gives_every_split_annotated_clusters() -> None:
    """Issue 27 item 8: splits were drawn before annotations were matched, so dev (50 random clusters
    of ~800 in the paper; here 2 of 6) could hold no annotated cluster at all, or take all of them."""
    geo = [Cluster(f"g{i}", "*", [article(f"g{i} x", categories=["Geography/Regions"])]) for i in range(6)]
    test = Cluster("t0", "*", [article("t0 y", categories=["Culture/Sports"])])
    annotated = {"g1", "g4", "t0"}
    for seed in range(10):
        clusters = [*geo, test]
        split_clusters(clusters, "Geography", dev_clusters=2, seed=seed, annotated=annotated)
        splits = {c.id: c.split for c in clusters}
        assert splits["t0"] == "test" and all(splits[c.id] != "test" for c in geo)  # by category
        assert {splits[c] for c in annotated} == {"train", "dev", "test"}, seed  # each split has examples
        assert sum(s == "dev" for s in splits.values()) == 2  # the dev count is kept
    # with as many dev clusters asked as annotated ones exist, one still goes to train
    clusters = [*geo, test]
    split_clusters(clusters, "Geography", dev_clusters=50, seed=0, annotated=annotated)
    assert sorted(c.split for c in clusters if c.id in annotated) == ["dev", "test", "train"]


# --------------------------------------------------------------------------------------------- annotations
def test_cumulative_instructions_union_targets_and_drop_noncontiguous() -> None:
    art = article("2016 Summer Olympics", "First. Second. Third. Fourth.")
    assert art.target_sentences == ["First.", "Second.", "Third.", "Fourth."]
    cluster = Cluster("c0", "* summer olympics", [art, article("2012 Summer Olympics", "Other.")])
    annotation = Annotation(
        "c0",
        ["Say what.", "Say when.", "Say who.", "Say where.", "Say why."],
        # rows: target sentences; columns: instruction sentences
        {art.id: [[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0]]},
    )
    stats = BuildStats()
    examples = list(cumulative_examples(cluster, annotation, stats))
    got = {e.metadata["instruction_sentences"]: (e.instruction, e.references[0]) for e in examples}
    assert got == {
        1: ("Say what.", "First."),
        # I_2 -> sentences {0, 2}: not contiguous, dropped
        3: ("Say what. Say when. Say who.", "First. Second. Third."),
        4: ("Say what. Say when. Say who. Say where.", "First. Second. Third."),
        5: ("Say what. Say when. Say who. Say where. Say why.", "First. Second. Third."),
    }
    assert stats.counts == {
        "instructions_formed": 5,
        "noncontiguous_targets": 1,
        "dropped_noncontiguous_target": 1,
        "examples": 4,
        "articles_not_annotated": 1,
    }
    assert examples[0].id == f"{art.id}#I1" and examples[0].document is art.document
    kept = list(cumulative_examples(cluster, annotation, BuildStats(), keep_noncontiguous=True))
    assert [e.references[0] for e in kept][1] == "First. Third."
    annotation.relevance[art.id] = [[1, 0, 0, 0, 0]]
    with pytest.raises(InputError, match="1 flag rows for 4 target sentences"):
        list(cumulative_examples(cluster, annotation, BuildStats()))


def test_read_articles_and_annotations_validate_the_schema(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "a.jsonl", [*olympics(2, odd_one=False), {"title": "No lead"}, {"lead": "x"}]
    )
    with pytest.raises(InputError, match=r"a\.jsonl:3: field 'lead'"):
        list(read_articles(path))
    stats: dict[str, int] = {}
    articles = list(read_articles(path, skip_bad_lines=True, stats=stats))
    assert [a.id for a in articles] == ["oly1988", "oly1992"] and stats["skipped"] == 2
    assert (
        articles[0].document.sections[1].heading == "Venues"
        and articles[0].document.title == articles[0].title
    )
    bad = write_lines(
        tmp_path / "ann.jsonl", [{"cluster": "c0", "instructions": ["A.", "B."], "relevance": {"x": [[1]]}}]
    )
    with pytest.raises(InputError, match="one row of 2 0/1 flags"):
        read_annotations(bad)


def test_cli_builds_clusters_and_examples_with_counts(tmp_path: Path, capsys) -> None:
    articles = write_lines(tmp_path / "articles.jsonl", olympics(6))
    out = tmp_path / "out"
    assert main(["data", "instructsum", "--articles", str(articles), "-o", str(out)]) == 0
    clusters = [json.loads(line) for line in (out / "clusters.jsonl").read_text().splitlines()]
    assert len(clusters) == 1 and clusters[0]["size"] == 6 and clusters[0]["pattern"] == "* summer olympics"
    members = clusters[0]["articles"]
    assert len(members[0]["target_sentences"]) == 3
    printed = capsys.readouterr().out
    assert "targets dropped by levenshtein: 1" in printed and "clusters: 1" in printed

    annotation = {
        "cluster": clusters[0]["cluster"],
        "instructions": ["Say where the games were held.", "Say how many athletes came.", "Say when."],
        "relevance": {m["id"]: [[1, 0, 0], [0, 1, 0], [0, 0, 1]] for m in members[:4]},
    }
    annotations = write_lines(tmp_path / "ann.jsonl", [annotation])
    argv = [
        "data",
        "instructsum",
        "--articles",
        str(articles),
        "--annotations",
        str(annotations),
        "-o",
        str(out),
    ]
    assert main([*argv, "--test-category-absent", "Geography", "--dev-clusters", "0"]) == 0
    printed = capsys.readouterr().out
    assert "examples: 12" in printed and "articles not annotated: 2" in printed
    # the one cluster has Geography articles: it is not test; no dev clusters asked for
    examples = list(read_examples(out / "examples_train.jsonl"))
    assert len(examples) == 12 and not list((out / "examples_test.jsonl").read_text().splitlines())
    assert examples[2].instruction == " ".join(annotation["instructions"])
    assert examples[2].references == [" ".join(members[0]["target_sentences"])]
    assert json.loads((out / "stats.json").read_text())["examples"] == 12


def test_cli_refuses_missing_inputs(tmp_path: Path, capsys) -> None:
    assert main(["data", "instructsum", "-o", str(tmp_path)]) == 2
    assert "--articles" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- QMSum
def test_qmsum_general_and_specific_queries_are_instructions(
    shared_data: Path, tmp_path: Path, capsys
) -> None:
    stats = BuildStats()
    examples = qmsum_instruction_examples(shared_data / "qmsum", split="val", stats=stats)
    assert stats.counts["qmsum_meetings"] == 35
    assert stats.counts["qmsum_general_queries"] >= 35 and stats.counts["qmsum_specific_queries"] > 100
    assert all(e.instruction and e.references[0] for e in examples)
    assert {e.metadata["instruction_type"] for e in examples} == {"general", "specific"}
    # many instructions per meeting document: the cache's setting
    assert len(examples) / stats.counts["qmsum_documents"] > 5
    out = tmp_path / "q"
    assert (
        main(["data", "instructsum", "--qmsum", str(shared_data / "qmsum"), "--split", "val", "-o", str(out)])
        == 0
    )
    assert "qmsum specific queries" in capsys.readouterr().out
    assert len(list(read_examples(out / "qmsum_val.jsonl"))) == len(examples)
