"""Hugging Face ``datasets`` corpora (``--corpus hf``): a ``save_to_disk`` folder, parquet or arrow files.

Records are mapped to Examples by the same column options as JSONL/CSV (:class:`~.tabular.Columns`:
``--text-column``, ``--summary-column``, ``--id-column``, ...). Where the data has splits (a saved
``DatasetDict``; parquet/arrow files named after their split, as the Hub lays them out:
``train.parquet``, ``train-00000-of-00002.parquet``, ``data/train-*.parquet``, ``train/*.arrow``),
``--split`` picks one; a saved ``DatasetDict`` of one split needs none. Needs the ``datasets`` package
(``pip install 'synopsis[hf]'``). Tables are memory-mapped (Arrow), and records are read one at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded
from synopsis.data.readers.tabular import Columns, column_reader
from synopsis.errors import InputError

SUFFIXES = (".parquet", ".arrow")


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise InputError("--corpus hf needs the `datasets` package: pip install 'synopsis[hf]'") from None
    datasets.disable_progress_bars()
    return datasets


def _split_files(path: Path, split: str | None) -> list[Path]:
    """The parquet/arrow files of ``split`` under folder ``path`` (all of them without a split)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    if split is None:
        return files

    def belongs(file: Path) -> bool:
        relative = file.relative_to(path)
        return split in relative.parts[:-1] or file.stem == split or file.stem.startswith(f"{split}-")

    return [f for f in files if belongs(f)]


def load_hf_dataset(path: Path, split: str | None) -> Any:
    """The ``datasets.Dataset`` at ``path`` (one split of it)."""
    datasets = _datasets()
    if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        try:
            loaded = datasets.load_from_disk(str(path))
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot load the saved dataset ({str(err).splitlines()[0]})") from None
        if isinstance(loaded, datasets.DatasetDict):
            if split is None and len(loaded) == 1:
                return next(iter(loaded.values()))
            if split not in loaded:
                raise InputError(
                    f"{path}: {'give --split' if split is None else f'no split {split!r}'} "
                    f"(splits: {', '.join(loaded)})"
                )
            return loaded[split]
        if split is not None:
            raise InputError(f"{path}: a saved Dataset (not a DatasetDict) has no splits; leave out --split")
        return loaded
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise InputError(f"{path}: --corpus hf reads a save_to_disk folder or .parquet / .arrow files")
        files = [path]
    else:
        files = _split_files(path, split)
        if not files:
            what = "no .parquet or .arrow files" + (f" of split {split!r}" if split else "")
            raise InputError(f"{path}: {what}, and no save_to_disk dataset (dataset_dict.json / state.json)")
    kinds = {f.suffix for f in files}
    if len(kinds) > 1:
        raise InputError(f"{path}: both parquet and arrow files; point at one kind")
    try:
        if kinds == {".parquet"}:
            return datasets.Dataset.from_parquet([str(f) for f in files])
        return datasets.concatenate_datasets([datasets.Dataset.from_file(str(f)) for f in files])
    except (OSError, ValueError) as err:  # pyarrow's errors derive from these
        kind = kinds.pop()[1:]
        raise InputError(f"{path}: cannot read the {kind} data ({str(err).splitlines()[0]})") from None


@column_reader
def read_hf(
    path: Path, split: str | None, skip_bad_lines: bool, stats: dict[str, int], mapping: Columns
) -> Iterator[Example]:
    """A Hugging Face dataset, one example per row, mapped by the column options (see :class:`Columns`)."""
    dataset = load_hf_dataset(path, split)
    stem = split or path.stem
    label = f"{path}[{split}]" if split else str(path)

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        yield from enumerate(dataset)

    def parse(item: tuple[int, dict[str, Any]]) -> list[Example]:
        number, record = item
        return [mapping.example(record, f"{label}: row {number}", number, stem)]

    yield from guarded(rows(), parse, skip_bad_lines, stats)
