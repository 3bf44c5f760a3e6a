"""Data: the Example type, its JSONL format, and readers for every supported corpus format."""

from synopsis.data.example import Example, read_examples, write_examples

__all__ = ["Example", "read_examples", "write_examples"]
