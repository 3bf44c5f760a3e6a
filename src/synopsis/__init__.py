"""synopsis: controllable, structure-aware neural abstractive summarization."""

from synopsis.document import Document, Section, Sentence

__version__ = "0.1.0"
__all__ = ["Document", "Section", "Sentence", "__version__"]
