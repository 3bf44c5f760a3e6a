"""Shared by the tests (moved from tests/test_instructsum_path.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synopsis.data.example import Example, write_examples
from synopsis.document import Document, Section

DOCUMENT = Document(
    Section(
        children=[
            Section("Method", [["We train a small model on meeting transcripts.", "It runs on a CPU."]]),
            Section("Results", [["Scores improve by two points.", "Speed doubles."]]),
        ]
    ),
    title="A study of   meetings",
)


INSTRUCTIONS = ["What is the method?", "Summarize the results in one sentence, mentioning the speed."]


def instruction_run(model: Path, tmp_path: Path, instructions: list[str], **settings: Any) -> Any:
    """A two-step training config over four instruction examples of :data:`DOCUMENT` (written to tmp_path)."""
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    examples = [
        Example(f"e{i}", DOCUMENT, [f"the {word} of the study"], instruction=instruction)
        for i, (word, instruction) in enumerate(zip(["method", "results"] * 2, instructions * 2, strict=True))
    ]
    write_examples(examples, tmp_path / "train.jsonl")
    return Seq2SeqTrainConfig(
        model=str(model),
        output_dir=str(tmp_path / "run"),
        train_path=str(tmp_path / "train.jsonl"),
        max_dev_examples=2,
        batch_size=2,
        max_steps=2,
        eval_every=2,
        eval_max_length=6,
        patience=0,
        **settings,
    )
