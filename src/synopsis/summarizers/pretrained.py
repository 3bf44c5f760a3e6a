"""Which pretrained hub checkpoint to suggest for a document the bundled model is not made for.

The bundled pointer-generator was trained on paper abstracts; out of its domain the default summarizes with
the document's own sentences, and its note names what gives a readable abstractive summary instead: a
summarization checkpoint on the Hugging Face hub chosen by what the document is (:func:`document_kind`: a
dialogue or meeting transcript, a paper, a licence or other legal text, else news-like prose), by its name,
with what it costs to fetch it once (or that it is already in the cache). The note's words are the same for
the library, the CLI, the API and the page (each names a model its own way: ``--model``, ``"model"``, the
menu), so it names the checkpoint and no flag. These are suggestions, well-known public checkpoints, not
models this project trained or measured on such documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synopsis.document import Document


@dataclass(frozen=True)
class Suggestion:
    """A pretrained summarization checkpoint: ``parameters`` in millions; ``reads``: its input, in tokens."""

    repo_id: str
    made_for: str
    parameters: int
    reads: int

    @property
    def download(self) -> str:
        """Its float32 safetensors weights, 4 bytes a parameter."""
        return f"about {self.parameters * 4 / 1000:.1f} GB"


#: BART-large fine-tuned on CNN/DailyMail news (Lewis et al., 2020): 406M parameters, 1,024 input tokens;
#: its generation config is the paper's (beam 4, 56-142 tokens, no repeated trigrams).
BART_LARGE_CNN = Suggestion("facebook/bart-large-cnn", "news summaries", 406, 1024)
#: bart-large-cnn fine-tuned on SAMSum chat dialogues (Gliwa et al., 2019), one of the hub's most used
#: dialogue summarizers; its dialogues are short, so a meeting goes section by section.
BART_SAMSUM = Suggestion("philschmid/bart-large-cnn-samsum", "dialogue summaries", 406, 1024)
#: Longformer-Encoder-Decoder fine-tuned on arXiv papers (Beltagy et al., 2020): a whole paper in one call.
LED_ARXIV = Suggestion("allenai/led-large-16384-arxiv", "paper abstracts from whole papers", 460, 16384)
#: PEGASUS fine-tuned on BillSum, US Congressional bills (Zhang et al., 2020): no public checkpoint is
#: trained on licences; legislation is the nearest legal text a well-known one was trained on.
PEGASUS_BILLSUM = Suggestion("google/pegasus-billsum", "US bills, the nearest legal text", 568, 1024)
#: What each kind of document gets (:func:`document_kind`).
SUGGESTIONS = {"dialogue": BART_SAMSUM, "paper": LED_ARXIV, "legal": PEGASUS_BILLSUM, "prose": BART_LARGE_CNN}
#: Subword tokens per English word, roughly, for BART's byte-level BPE.
TOKENS_PER_WORD = 1.3

# A speaker's label opening a turn ("Grad A: ", "Professor C: ", "SPEAKER 1: ").
_SPEAKER = re.compile(r"^[A-Z][\w.' -]{0,30}:\s+\S")
# A paper's usual section headings (numbers and case aside).
_PAPER_HEADINGS = re.compile(
    r"^(abstract|introduction|related work|background|methods?|methodology|approach|experiments?|"
    r"experimental (setup|results)|evaluation|results|discussion|conclusions?|references|acknowledge?ments)\b"
)
# Words of licences, contracts and statutes.
_LEGAL = re.compile(
    r"\b(licen[cs]e[ed]?|licensee|licensor|warrant(y|ies)|liabilit(y|ies)|hereby|herein|hereunder|thereof|"
    r"pursuant|notwithstanding|indemnif\w*|copyright|shall)\b",
    re.IGNORECASE,
)


def document_kind(document: Document) -> str:
    """``dialogue`` (most paragraphs open with a speaker's label: a meeting or chat transcript), ``paper``
    (two or more of a paper's usual headings: Introduction, Method, Results, Conclusion, References...),
    ``legal`` (a licence, contract or statute: its title says so, or one word in 60 is of the law's
    vocabulary: shall, licensee, warranty, liability, hereby...), else ``prose``."""
    paragraphs = [p for p in document.paragraphs if p]
    if paragraphs and 2 * sum(bool(_SPEAKER.match(p[0])) for p in paragraphs) > len(paragraphs):
        return "dialogue"
    headings = {
        re.sub(r"^[\dIVXivx.\s]+(?=[A-Za-z])", "", s.heading).strip().lower()
        for s in document.sections
        if s.heading
    }
    if sum(bool(_PAPER_HEADINGS.match(h)) for h in headings) >= 2:
        return "paper"
    text = " ".join(s.text for s in document.sentences)
    words = len(text.split())
    title = document.title or ""
    if re.search(r"\b(licen[cs]e|agreement|terms of (use|service)|contract)\b", title, re.IGNORECASE):
        return "legal"
    if words and 60 * len(_LEGAL.findall(text)) >= words:
        return "legal"
    return "prose"


def abstractive_hint(document: Document) -> str:
    """The end of the default's note: which pretrained checkpoint gives an abstractive summary of
    ``document`` (by :func:`document_kind`), in words every adapter shows as they are."""
    from synopsis.hub import is_cached

    model = SUGGESTIONS[document_kind(document)]
    words = sum(len(sentence.text.split()) for sentence in document.sentences)
    cost = "in your cache" if is_cached(model.repo_id) else f"{model.download} to download, once"
    how = f"the pretrained model {model.repo_id} ({model.made_for}; {cost})"
    if words * TOKENS_PER_WORD > model.reads:
        how += f", which reads {model.reads:,} tokens at a time, so this document would go section by section"
    return f"for an abstractive summary, name {how}"
