"""``--method salient``: the document's own sentences, central or relevant, each citing itself (the default
summary of anything that is not a paper abstract).

1. **Candidates** (:mod:`.rules`): informative prose that stands alone. Backchannels ("Mm-hmm."), fragments,
   code lines, shell commands, table-of-contents entries and link lists are never candidates while prose
   exists; a sentence must open as a sentence and end as one (as written or PTB-tokenized), and not run on
   from the one before ("Which ..."). A lead-in ending in ":" is a candidate only together with the list or
   short command it introduces (:mod:`.units`).
2. **Centrality** (:mod:`.centrality`): position-augmented directed centrality (PacSum, Zheng and Lapata,
   2019) over TF-IDF vectors of the document's informative sentences: a sentence gains from the sentences
   after it that restate it. In a document with headings, the opening (preface or introduction) is weighed
   as a reader weighs it and its defining sentence leads (:mod:`.opening`).
3. **Relevance** to a specific instruction (:mod:`.relevance`): BM25 plus sentence embeddings
   (all-MiniLM-L6-v2), each sentence read under its heading, a transcript's turns with their neighbours; a
   general request ("Summarize the whole meeting") gets the general summary.
4. **Choice**: the budget (``--max-words``) filled with whole candidates, best first, none repeating a chosen
   one; a sentence opening with a pronoun only after the sentence before it. By section, each section's
   ``k`` sentences by maximal marginal relevance (Carbonell and Goldstein, 1998), each section passed on as
   soon as it is chosen; the document summary is chosen over the whole document, not composed of them.

The weights were chosen on dev data only (CNN/DailyMail, SciSummNet, arXiv/PubMed, QMSum train/val):
docs/results/default_quality.md has the ablation of each rule and the comparison with LEAD-3, sumy and a
TF-IDF query match (``benchmarks/default_quality.py``).
"""

from synopsis.summarizers.salient.centrality import (
    TfidfVectors,
    budgeted_mmr,
    default_vectors,
    directed_centrality,
    mmr,
)
from synopsis.summarizers.salient.relevance import is_general
from synopsis.summarizers.salient.rules import is_informative, stands_alone, title_names
from synopsis.summarizers.salient.summarizer import DocumentRun, SalientSummarizer, Weights
from synopsis.summarizers.salient.units import CodeSource, all_sources, inline_code, lead_in_units, unit_text

__all__ = [
    "CodeSource",
    "DocumentRun",
    "SalientSummarizer",
    "TfidfVectors",
    "Weights",
    "all_sources",
    "budgeted_mmr",
    "default_vectors",
    "directed_centrality",
    "inline_code",
    "is_general",
    "is_informative",
    "lead_in_units",
    "mmr",
    "stands_alone",
    "title_names",
    "unit_text",
]
