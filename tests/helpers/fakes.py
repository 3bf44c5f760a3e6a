"""Fake summarizers for the service's tests: real :class:`~synopsis.summarizers.Summarizer` subclasses (they
describe themselves and make copies with options like any method), whose output is cheap and predictable;
and fake GPUs (:func:`fake_gpus`) for the device tests on a machine without one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.summarizers.base import Summarizer, SummarizerInfo


class FakeSummarizer(Summarizer):
    """A fake method: subclasses override ``summarize`` (or ``_summarize_batch``). ``by_section_capable``
    False makes a model that cannot summarize by section; options are accepted and change nothing unless a
    subclass says (``_with_options``)."""

    method = "fake"
    description = "a fake for the tests"
    by_section_capable = True

    def describe(self) -> SummarizerInfo:
        return replace(self._info(self.method, self.description), by_section=self.by_section_capable)

    def _with_options(self, options: dict[str, Any]) -> Summarizer:
        return self

    def _summarize_batch(
        self,
        documents: list[Document],
        instructions: list[str | None],
        references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} overrides summarize")


def fake_gpus(monkeypatch: Any, count: int) -> None:
    """torch sees ``count`` CUDA GPUs (0: none), the current one GPU 0; nothing is ever computed on them."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
