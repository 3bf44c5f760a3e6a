"""Which pretrained hub checkpoint to suggest for a document the bundled model is not made for.

The bundled pointer-generator was trained on paper abstracts; out of its domain the default summarizes with
the document's own sentences, and its note names what gives a readable abstractive summary instead: a
summarization checkpoint on the Hugging Face hub, by its name (``--model org/name``), with what it costs to
fetch it once (or that it is already in the cache).
"""

from __future__ import annotations

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
#: Subword tokens per English word, roughly, for BART's byte-level BPE.
TOKENS_PER_WORD = 1.3


def abstractive_hint(document: Document) -> str:
    """The end of the default's note: how to get an abstractive summary of ``document``."""
    from synopsis.hub import is_cached

    model = BART_LARGE_CNN
    words = sum(len(sentence.text.split()) for sentence in document.sentences)
    cost = "in your cache" if is_cached(model.repo_id) else f"{model.download} to download, once"
    how = f"--model {model.repo_id} ({model.made_for}; {cost})"
    if words * TOKENS_PER_WORD > model.reads:
        how += f", which reads {model.reads:,} tokens at a time, so this document goes section by section"
    return f"for an abstractive summary: {how} (a service offers it with serve --model NAME={model.repo_id})"
