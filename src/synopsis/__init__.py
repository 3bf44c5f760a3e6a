"""synopsis: controllable, structure-aware neural abstractive summarization."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Document", "Section", "Sentence", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that the ``synopsis`` command's launcher starts before numpy loads
    # (a Ctrl-C during start-up is then its one line, see ``synopsis.__main__``).
    if name in ("Document", "Section", "Sentence"):
        from synopsis import document

        return getattr(document, name)
    raise AttributeError(f"module 'synopsis' has no attribute {name!r}")
