"""WordNet 3.0 for METEOR from Debian's ``wordnet-base`` and ``wordnet-sense-index`` packages.

NLTK's WordNet reader wants one directory holding the database files, ``index.sense`` and ``lexnames``.
Debian installs the first two under ``/usr/share/wordnet`` but not ``lexnames``; its content (45 lexicographer
file numbers and names) is the table in Debian's own ``lexnames(5WN)`` manual page, which we parse. The
directory is built once under ``$XDG_CACHE_HOME/synopsis/nltk_data/corpora/wordnet`` (default ``~/.cache``),
with copies rather than links: NLTK refuses to open files that resolve outside its registered data roots.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from synopsis.errors import ConfigError

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

DEBIAN_WORDNET = Path("/usr/share/wordnet")
LEXNAMES_MANPAGE = Path("/usr/share/man/man5/lexnames.5WN.gz")
INSTALL_HINT = "apt-get install wordnet-base wordnet-sense-index"
_DATABASE_FILES = (
    "cntlist.rev",
    "index.sense",
    *(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("adj", "adv", "noun", "verb")),
    *(f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")),
)
_SYNTACTIC_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "synopsis" / "nltk_data" / "corpora" / "wordnet"


def lexnames_from_manpage(manpage: Path = LEXNAMES_MANPAGE) -> str:
    """The ``lexnames`` file (``NN<TAB>name<TAB>category``) from the table in lexnames(5WN)."""
    text = gzip.decompress(manpage.read_bytes()).decode("latin-1")
    rows = re.findall(r"^(\d\d)\t(\w+\.\w+)\s*\t", text, flags=re.MULTILINE)
    if [int(number) for number, _ in rows] != list(range(len(rows))) or len(rows) < 45:
        raise ConfigError(f"{manpage}: unexpected lexicographer file table")
    return "".join(f"{n}\t{name}\t{_SYNTACTIC_CATEGORY[name.split('.')[0]]}\n" for n, name in rows)


def build_wordnet_dir(target: Path | None = None, source: Path = DEBIAN_WORDNET) -> Path:
    """Create (if needed) the NLTK WordNet directory from Debian's files; return its path."""
    target = target or cache_dir()
    missing = [name for name in _DATABASE_FILES if not (source / name).is_file()]
    if missing or not LEXNAMES_MANPAGE.is_file():
        absent = ", ".join(missing) if missing else str(LEXNAMES_MANPAGE)
        raise ConfigError(f"WordNet data for METEOR not found ({absent}): {INSTALL_HINT}")
    if (target / "lexnames").is_file() and all((target / name).exists() for name in _DATABASE_FILES):
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name in _DATABASE_FILES:
        tmp = target / f"{name}.tmp"
        shutil.copyfile(source / name, tmp)
        tmp.replace(target / name)
    tmp = target / "lexnames.tmp"
    tmp.write_text(lexnames_from_manpage(), encoding="utf-8")
    tmp.replace(target / "lexnames")  # last, so a half-built directory is never taken as complete
    return target


@lru_cache(maxsize=1)
def load_wordnet() -> WordNetCorpusReader:
    """NLTK's WordNet reader on Debian's WordNet 3.0 (built into the cache on first use)."""
    import warnings

    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = build_wordnet_dir()
    data_root = str(root.parent.parent)  # .../nltk_data: NLTK only reads corpora under its data path
    if data_root not in nltk.data.path:
        nltk.data.path.append(data_root)
    with warnings.catch_warnings():  # "multilingual functions are not available": we need English only
        warnings.simplefilter("ignore", UserWarning)
        return WordNetCorpusReader(str(root), None)
