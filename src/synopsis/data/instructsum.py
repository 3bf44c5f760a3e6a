"""The InstructSum dataset construction (Nishida et al., InstructSum, section 2.2 and Appendix A).

Pipeline on any JSONL of titled articles with lead sections (Wikipedia in the paper):

1. **Sources and targets.** The lead section is the target, the rest of the article the source.
2. **Title clusters.** Titles are split into words (lower-cased :func:`~synopsis.text.word_tokenize`);
   titles of the same length that agree everywhere except at one position form a cluster
   ("2016 Summer Olympics" / "2020 Summer Olympics"). An article can match several patterns; it is put in
   the largest one (patterns taken largest first, ties in sorted order, each keeping the articles not yet
   taken if at least two remain). Duplicate titles keep their first article. Titles shorter than
   ``min_title_words`` (default 2) are not clustered, since a one-word title would match every other one.
3. **Levenshtein filter.** Targets are split into words; a target whose word-level Levenshtein distance
   to *every* other target of its cluster is at least ``ratio`` (0.7) times its own length in words is
   dropped (distances to the cluster as it was before the filter).
4. **Small clusters.** Clusters of ``min_cluster_size - 1`` = 4 or fewer articles are dropped.
5. **Annotations** (optional, by people): per cluster, instruction sentences (5 in the paper) and, per
   target sentence, a relevance flag per instruction sentence. The instruction ``I_j`` is sentences
   ``1..j``; its target is the target sentences flagged for any of them, in order; it is dropped if empty
   or not contiguous (the paper keeps non-contiguous targets only for its per-length analysis:
   ``keep_noncontiguous``).
6. **Splits** (optional, Appendix A.2), by cluster and after the annotations are matched: clusters with
   no article in a category starting with ``test_category_absent`` ("Geography" in the paper: its 104
   evaluation clusters contain no Geography article) form the test set, ``dev_clusters`` random others the
   dev set (drawn from the annotated clusters, leaving at least one to train), the rest the training set,
   so that test instructions are unseen and every split that can have examples gets some.

Counts are kept at every stage (:class:`BuildStats`). QMSum's general and specific queries give real
instruction data: :func:`qmsum_instruction_examples`.

Input schema (one article per line)::

    {"id": "Fujifilm_X-T2",                 # optional; default: the title
     "title": "Fujifilm X-T2",
     "lead": "The Fujifilm X-T2 is ...",     # the target text
     "text": "plain text, paragraphs separated by blank lines"      # the source, either this ...
     "sections": [{"heading": "Features", "text": "..."}, ...],     # ... or sections ("paragraphs": [...]
                                                                     #     lists of strings also accepted)
     "categories": ["Culture/Media", ...]}    # optional, for the split

Annotation schema (one cluster per line; ``cluster`` is an id from ``clusters.jsonl``)::

    {"cluster": "c00012",
     "instructions": ["Firstly, mention what kind of camera it is.", "Secondly, ...", ...],
     "relevance": {"<article id>": [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], ...]},
     "target_sentences": {"<article id>": ["...", "..."]}}            # optional

``relevance[id][s][j]`` is 1 when target sentence ``s`` covers instruction sentence ``j``. Rows follow the
article's ``target_sentences`` in ``clusters.jsonl`` (the builder's sentence split), unless the annotation
gives its own ``target_sentences``. Articles of the cluster without flags are skipped (and counted).
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.qmsum import read_qmsum
from synopsis.document import Document, Section
from synopsis.errors import InputError
from synopsis.io import iter_jsonl, open_for_atomic_write
from synopsis.text import split_paragraphs, split_sentences, word_tokenize

logger = logging.getLogger(__name__)

LEVENSHTEIN_RATIO = 0.7
MIN_CLUSTER_SIZE = 5  # "clusters of size 4 or less are dropped"
MIN_TITLE_WORDS = 2


# --------------------------------------------------------------------------------------------- articles
@dataclass
class Article:
    """One titled article: its lead (the target) and the rest (the source document)."""

    id: str
    title: str
    lead: str
    document: Document
    categories: list[str] = field(default_factory=list)

    @property
    def target_sentences(self) -> list[str]:
        return split_sentences(" ".join(self.lead.split()))


def _source_document(record: dict[str, Any], where: str, title: str, article_id: str) -> Document:
    if "sections" in record:
        sections = record["sections"]
        if not isinstance(sections, list):
            raise InputError(f"{where}: field 'sections' must be a list of objects")
        root = Section()
        for i, section in enumerate(sections):
            place = f"{where}: sections[{i}]"
            if not isinstance(section, dict):
                raise InputError(f"{place}: expected an object with 'heading' and 'text' or 'paragraphs'")
            heading = section.get("heading")
            if heading is not None and not isinstance(heading, str):
                raise InputError(f"{place}: field 'heading' must be a string")
            if isinstance(section.get("text"), str):
                paragraphs = split_paragraphs(section["text"])
            elif isinstance(section.get("paragraphs"), list) and all(
                isinstance(p, str) for p in section["paragraphs"]
            ):
                paragraphs = section["paragraphs"]
            else:
                raise InputError(f"{place}: needs 'text' (a string) or 'paragraphs' (a list of strings)")
            sentences = [split_sentences(p) for p in paragraphs]
            root.add(Section(heading=heading, paragraphs=[s for s in sentences if s]))
        return Document(root, title=title, id=article_id)
    text = record.get("text")
    if not isinstance(text, str):
        raise InputError(f"{where}: needs the source as 'text' (a string) or 'sections' (a list)")
    return Document.from_text(text, title=title, id=article_id)


def read_articles(
    path: str | Path, skip_bad_lines: bool = False, stats: dict[str, int] | None = None
) -> Iterator[Article]:
    """Articles from the JSONL schema in the module docstring; bad lines raise or are counted as skipped.

    ``stats`` counts ``articles_read``, ``skipped`` (bad lines) and ``no_lead_or_source`` (articles with
    an empty lead or an empty source, which cannot be used).
    """
    stats = stats if stats is not None else {}
    for key in ("articles_read", "skipped", "no_lead_or_source"):
        stats.setdefault(key, 0)
    for where, record in iter_jsonl(path, skip_bad_lines=skip_bad_lines, stats=stats):
        try:
            if not isinstance(record, dict):
                raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
            title, lead = record.get("title"), record.get("lead")
            if not isinstance(title, str) or not title.strip():
                raise InputError(f"{where}: field 'title' must be a non-empty string")
            if not isinstance(lead, str):
                raise InputError(f"{where}: field 'lead' must be a string")
            article_id = str(record.get("id", title))
            categories = record.get("categories", [])
            if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
                raise InputError(f"{where}: field 'categories' must be a list of strings")
            document = _source_document(record, where, title.strip(), article_id)
        except InputError:
            if not skip_bad_lines:
                raise
            stats["skipped"] += 1
            continue
        stats["articles_read"] += 1
        if not lead.strip() or document.is_empty():
            stats["no_lead_or_source"] += 1
            continue
        yield Article(article_id, title.strip(), lead.strip(), document, list(categories))


# --------------------------------------------------------------------------------------------- clusters
@dataclass
class Cluster:
    """Articles whose titles differ in exactly one word; ``pattern`` shows the common words and a ``*``."""

    id: str
    pattern: str
    articles: list[Article]
    split: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.id,
            "pattern": self.pattern,
            "split": self.split,
            "size": len(self.articles),
            "articles": [
                {
                    "id": a.id,
                    "title": a.title,
                    "categories": a.categories,
                    "target_sentences": a.target_sentences,
                }
                for a in self.articles
            ],
        }


def title_words(title: str) -> list[str]:
    return word_tokenize(title, lower=True)


def cluster_titles(articles: Iterable[Article], min_title_words: int = MIN_TITLE_WORDS) -> list[Cluster]:
    """Clusters of at least two articles whose titles agree except at one word position (see module doc)."""
    by_title: dict[tuple[str, ...], Article] = {}
    for article in articles:
        words = tuple(title_words(article.title))
        if len(words) >= min_title_words:
            by_title.setdefault(words, article)
    patterns: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[str, ...]]] = defaultdict(list)
    for words in by_title:
        for k in range(len(words)):
            patterns[(words[:k], words[k + 1 :])].append(words)
    order = sorted((p for p, m in patterns.items() if len(m) >= 2), key=lambda p: (-len(patterns[p]), p))
    taken: set[tuple[str, ...]] = set()
    clusters = []
    for before, after in order:
        members = [w for w in patterns[(before, after)] if w not in taken]
        if len(members) < 2:
            continue
        taken.update(members)
        pattern = " ".join([*before, "*", *after])
        clusters.append(Cluster(f"c{len(clusters):05d}", pattern, [by_title[w] for w in members]))
    return clusters


def word_levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two word sequences (Myers' bit-parallel algorithm, O(|b|) big-int ops)."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    peq: dict[str, int] = defaultdict(int)
    for i, word in enumerate(a):
        peq[word] |= 1 << i
    mask = (1 << len(a)) - 1
    last = 1 << (len(a) - 1)
    pv, mv, score = mask, 0, len(a)
    for word in b:
        eq = peq.get(word, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & last:
            score += 1
        elif mh & last:
            score -= 1
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score


def levenshtein_filter(
    cluster: Cluster, ratio: float = LEVENSHTEIN_RATIO
) -> tuple[list[Article], list[Article]]:
    """``(kept, dropped)``: a target is dropped when it is >= ``ratio`` x its length from every other one."""
    words = [word_tokenize(a.lead, lower=True) for a in cluster.articles]
    close = [False] * len(words)
    for i in range(len(words)):
        for j in range(i + 1, len(words)):
            if close[i] and close[j]:
                continue
            distance = word_levenshtein(words[i], words[j])
            close[i] = close[i] or distance < ratio * len(words[i])
            close[j] = close[j] or distance < ratio * len(words[j])
    kept = [a for a, c in zip(cluster.articles, close, strict=True) if c]
    dropped = [a for a, c in zip(cluster.articles, close, strict=True) if not c]
    return kept, dropped


def split_clusters(
    clusters: Sequence[Cluster],
    test_category_absent: str,
    dev_clusters: int = 50,
    seed: int = 0,
    annotated: set[str] | None = None,
) -> None:
    """Set ``cluster.split`` (Appendix A.2): test if no article has a category starting with
    ``test_category_absent`` (the paper: the 104 clusters without Geography), then ``dev_clusters`` random
    others dev, the rest train.

    ``annotated``: ids of the clusters that have examples. Dev is then drawn from those first, and at most
    all but one of them, so that train keeps annotated examples too (only unannotated clusters fill the rest
    of the dev count). Splits assigned before annotations are matched could leave dev (or train) with no
    examples at all.
    """
    rest = []
    for cluster in clusters:
        if any(c.startswith(test_category_absent) for a in cluster.articles for c in a.categories):
            rest.append(cluster)
        else:
            cluster.split = "test"
    random.Random(seed).shuffle(rest)
    if annotated is not None:
        with_examples = [c for c in rest if c.id in annotated]
        take = min(dev_clusters, max(len(with_examples) - 1, 0))
        if dev_clusters and len(with_examples) > 1:
            take = max(take, 1)
        dev = with_examples[:take]
        dev += [c for c in rest if c.id not in annotated][: max(dev_clusters - take, 0)]
    else:
        dev = rest[:dev_clusters]
    chosen = {id(c) for c in dev}
    for cluster in rest:
        cluster.split = "dev" if id(cluster) in chosen else "train"


@dataclass
class BuildStats:
    """Counts at each stage of the construction, in pipeline order."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, value: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + value

    def lines(self) -> list[str]:
        return [f"{key.replace('_', ' ')}: {value:,}" for key, value in self.counts.items()]


def build_clusters(
    articles: Iterable[Article],
    stats: BuildStats,
    ratio: float = LEVENSHTEIN_RATIO,
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    min_title_words: int = MIN_TITLE_WORDS,
) -> list[Cluster]:
    """Stages 2-4: title clusters, the Levenshtein filter, dropping small clusters (counts in ``stats``)."""
    articles = list(articles)
    stats.add("articles_usable", len(articles))
    titles = {tuple(title_words(a.title)) for a in articles}
    stats.add("duplicate_titles", len(articles) - len(titles))
    stats.add("titles_too_short", sum(len(t) < min_title_words for t in titles))
    clusters = cluster_titles(articles, min_title_words)
    stats.add("title_clusters", len(clusters))
    stats.add("articles_in_title_clusters", sum(len(c.articles) for c in clusters))
    filtered = []
    for cluster in clusters:
        kept, dropped = levenshtein_filter(cluster, ratio)
        stats.add("targets_dropped_by_levenshtein", len(dropped))
        filtered.append(Cluster(cluster.id, cluster.pattern, kept))
    final = [c for c in filtered if len(c.articles) >= min_cluster_size]
    stats.add("clusters_dropped_small", len(filtered) - len(final))
    stats.add(
        "articles_in_dropped_small_clusters",
        sum(len(c.articles) for c in filtered) - sum(len(c.articles) for c in final),
    )
    stats.add("clusters", len(final))
    stats.add("articles_in_clusters", sum(len(c.articles) for c in final))
    return final


# --------------------------------------------------------------------------------------------- annotations
@dataclass
class Annotation:
    cluster: str
    instructions: list[str]
    relevance: dict[str, list[list[int]]]
    target_sentences: dict[str, list[str]] = field(default_factory=dict)


def read_annotations(path: str | Path) -> dict[str, Annotation]:
    """Annotations by cluster id (schema in the module docstring); a malformed line raises InputError."""
    out: dict[str, Annotation] = {}
    for where, record in iter_jsonl(path):
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object")
        cluster = record.get("cluster")
        instructions = record.get("instructions")
        relevance = record.get("relevance")
        sentences = record.get("target_sentences", {})
        if not isinstance(cluster, str):
            raise InputError(f"{where}: field 'cluster' must be a string")
        if (
            not isinstance(instructions, list)
            or not instructions
            or not all(isinstance(s, str) and s.strip() for s in instructions)
        ):
            raise InputError(f"{where}: field 'instructions' must be a non-empty list of sentences")
        if not isinstance(relevance, dict):
            raise InputError(f"{where}: field 'relevance' must map article ids to flag rows")
        for article_id, rows in relevance.items():
            if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == len(instructions) and all(f in (0, 1) for f in r)
                for r in rows
            ):
                raise InputError(
                    f"{where}: relevance['{article_id}'] must be one row of {len(instructions)} 0/1 flags "
                    "per target sentence"
                )
        if not isinstance(sentences, dict) or not all(
            isinstance(v, list) and all(isinstance(s, str) for s in v) for v in sentences.values()
        ):
            raise InputError(f"{where}: field 'target_sentences' must map article ids to lists of strings")
        if cluster in out:
            raise InputError(f"{where}: cluster '{cluster}' is annotated twice")
        out[cluster] = Annotation(cluster, [" ".join(s.split()) for s in instructions], relevance, sentences)
    return out


def cumulative_examples(
    cluster: Cluster, annotation: Annotation, stats: BuildStats, keep_noncontiguous: bool = False
) -> Iterator[Example]:
    """Stage 5: ``I_j`` = instruction sentences 1..j and its target, for every annotated article."""
    for article in cluster.articles:
        flags = annotation.relevance.get(article.id)
        if flags is None:
            stats.add("articles_not_annotated")
            continue
        sentences = annotation.target_sentences.get(article.id, article.target_sentences)
        if len(flags) != len(sentences):
            raise InputError(
                f"annotation of cluster '{cluster.id}', article '{article.id}': {len(flags)} flag rows for "
                f"{len(sentences)} target sentences"
            )
        for j in range(1, len(annotation.instructions) + 1):
            stats.add("instructions_formed")
            relevant = [s for s, row in enumerate(flags) if any(row[:j])]
            if not relevant:
                stats.add("dropped_empty_target")
                continue
            contiguous = relevant == list(range(relevant[0], relevant[-1] + 1))
            if not contiguous:
                stats.add("noncontiguous_targets")
                if not keep_noncontiguous:
                    stats.add("dropped_noncontiguous_target")
                    continue
            stats.add("examples")
            yield Example(
                id=f"{article.id}#I{j}",
                document=article.document,
                references=[" ".join(sentences[s] for s in relevant)],
                instruction=" ".join(annotation.instructions[:j]),
                metadata={
                    "task": "instructsum",
                    "cluster": cluster.id,
                    "split": cluster.split,
                    "instruction_sentences": j,
                    "target_sentences": relevant,
                    "contiguous": contiguous,
                },
            )


def annotated_examples(
    clusters: Sequence[Cluster],
    annotations: dict[str, Annotation],
    stats: BuildStats,
    keep_noncontiguous: bool = False,
) -> list[Example]:
    """Stage 5 over all clusters; annotations of unknown clusters are counted and ignored."""
    known = {c.id for c in clusters}
    stats.add("annotated_clusters", sum(c in known for c in annotations))
    stats.add("annotations_for_unknown_clusters", sum(c not in known for c in annotations))
    examples = []
    for cluster in clusters:
        if cluster.id in annotations:
            examples += cumulative_examples(cluster, annotations[cluster.id], stats, keep_noncontiguous)
    stats.add("distinct_instructions", len({(e.metadata["cluster"], e.instruction) for e in examples}))
    return examples


# --------------------------------------------------------------------------------------------- QMSum
def qmsum_instruction_examples(
    path: Path,
    split: str | None = None,
    queries: str = "all",
    relevant_span_only: bool = False,
    stats: BuildStats | None = None,
) -> list[Example]:
    """QMSum's general and specific queries as instruction examples (the query is the instruction).

    Each meeting is one document with many queries, the setting the source cache is for.
    """
    read_stats: dict[str, int] = {}
    examples = []
    for example in read_qmsum(
        path, split=split, stats=read_stats, queries=queries, relevant_span_only=relevant_span_only
    ):
        example.metadata["task"] = "instructsum"
        example.metadata["instruction_type"] = example.metadata.get("query_type")
        examples.append(example)
    if stats is not None:
        meetings = {e.metadata["meeting"] for e in examples}
        stats.add("qmsum_meetings", len(meetings))
        stats.add("qmsum_general_queries", sum(e.metadata["query_type"] == "general" for e in examples))
        stats.add("qmsum_specific_queries", sum(e.metadata["query_type"] == "specific" for e in examples))
        stats.add("qmsum_examples", len(examples))
        stats.add("qmsum_documents", len({e.document.id for e in examples}))
    return examples


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> int:
    count = 0
    with open_for_atomic_write(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
