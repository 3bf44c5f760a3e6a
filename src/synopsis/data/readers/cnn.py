"""CNN / DailyMail ``.story`` files: the article, then each highlight after an ``@highlight`` line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded, read_input
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.text import split_paragraphs

#: What counts as a sentence end at the end of a highlight (See et al.'s make_datafiles.py END_TOKENS,
#: with DailyMail's closing quotes).
END_TOKENS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")


def fix_missing_period(highlight: str) -> str:
    """The highlight with a final period when it lacks sentence-final punctuation, as See et al.'s
    preprocessing does: CNN/DailyMail highlights mostly have none, and joined into one target they would
    read as one run-on sentence that a trained model rarely ends."""
    return highlight if not highlight or highlight.endswith(END_TOKENS) else highlight + "."


def split_story(text: str) -> tuple[str, list[str]]:
    """``(article text, highlights)``: everything before the first ``@highlight`` line is the article; the
    highlights as they are written (:func:`read_cnn` ends them with :func:`fix_missing_period`)."""
    lines = text.replace("\r\n", "\n").split("\n")
    article: list[str] = []
    highlights: list[str] = []
    in_highlights = expect_highlight = False
    for line in lines:
        stripped = line.strip()
        if stripped == "@highlight":
            in_highlights = expect_highlight = True
        elif in_highlights:
            if stripped and expect_highlight:
                highlights.append(stripped)
                expect_highlight = False
        else:
            article.append(line)
    return "\n".join(article), highlights


def parse_story(text: str, path: Path) -> Document:
    """The article of a ``.story`` file (paragraphs by blank lines, sentence-split); id = file stem."""
    article, _ = split_story(text)
    return Document.from_paragraphs(split_paragraphs(article), id=path.stem)


def read_cnn(
    path: Path, *, split: str | None = None, skip_bad_lines: bool = False, stats: dict[str, int]
) -> Iterator[Example]:
    """A folder of ``.story`` files (or one file). The reference is the highlights joined by newlines,
    one per line, so ROUGE-Lsum sees them as separate sentences; each ends with a period where it had no
    sentence-final punctuation (See et al.), so a target tokenised as words keeps its sentence ends."""
    if split is not None:
        raise InputError(f"{path}: .story folders have no splits; leave out --split")
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    files = sorted(path.glob("*.story")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: no .story files")

    def parse(file: Path) -> list[Example]:
        article, highlights = split_story(read_input(file))
        document = Document.from_paragraphs(split_paragraphs(article), id=file.stem)
        if document.is_empty():
            raise InputError(f"{file}: the story has no article text")
        if not highlights:
            raise InputError(f"{file}: no @highlight lines (the reference summary)")
        reference = "\n".join(fix_missing_period(h) for h in highlights)
        return [Example(id=file.stem, document=document, references=[reference])]

    yield from guarded(files, parse, skip_bad_lines, stats)
