"""The one Example type every reader produces, and its JSONL format."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.io import iter_jsonl, open_for_atomic_write


@dataclass
class Example:
    """A document to summarise, its reference summaries and optional controls.

    ``instruction`` is a natural-language query or instruction (QMSum queries, InstructSum);
    ``attributes`` are domain attributes such as ``{"style": "spoken", "topic": "news"}``.
    """

    id: str
    document: Document
    references: list[str] = field(default_factory=list)
    instruction: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "document": self.document.to_dict(),
            "references": self.references,
        }
        if self.instruction is not None:
            out["instruction"] = self.instruction
        if self.attributes:
            out["attributes"] = self.attributes
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "example") -> Example:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(data).__name__}")
        for key in ("id", "document"):
            if key not in data:
                raise InputError(f"{where}: missing field '{key}'")
        references = data.get("references", [])
        if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
            raise InputError(f"{where}: field 'references' must be a list of strings")
        instruction = data.get("instruction")
        if instruction is not None and not isinstance(instruction, str):
            raise InputError(f"{where}: field 'instruction' must be a string")
        attributes = data.get("attributes", {})
        if not isinstance(attributes, dict) or not all(isinstance(v, str) for v in attributes.values()):
            raise InputError(f"{where}: field 'attributes' must map names to strings")
        return cls(
            id=str(data["id"]),
            document=Document.from_dict(data["document"], f"{where}: field 'document'"),
            references=list(references),
            instruction=instruction,
            attributes=dict(attributes),
            metadata=dict(data.get("metadata", {})),
        )


def read_examples(
    path: str | Path, skip_bad_lines: bool = False, stats: dict[str, int] | None = None
) -> Iterator[Example]:
    """Read our JSONL; a malformed line raises an error naming file and line, unless ``skip_bad_lines``.

    With ``skip_bad_lines`` the number of skipped lines is counted in ``stats["skipped"]``.
    """
    stats = stats if stats is not None else {}
    stats.setdefault("skipped", 0)
    for where, record in iter_jsonl(path, skip_bad_lines=skip_bad_lines, stats=stats):
        try:
            yield Example.from_dict(record, where)
        except InputError:
            if not skip_bad_lines:
                raise
            stats["skipped"] += 1


def write_examples(examples: Iterable[Example], path: str | Path) -> int:
    """Write JSONL atomically (a crash never leaves a half-written file); returns the count."""
    count = 0
    with open_for_atomic_write(path) as handle:
        for example in examples:
            handle.write(json.dumps(example.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    return count
