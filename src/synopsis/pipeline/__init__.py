"""One summarize request, from what a user gives to the summaries written, the same under ``synopsis
summarize`` and the service (both are thin adapters over it).

* :mod:`~synopsis.pipeline.reading`: a file or pasted text read once (:func:`read_source`) into a
  :class:`ParsedDocument` with every sentence's character offsets;
* :mod:`~synopsis.pipeline.request`: the request typed once at the edge (:class:`SummarizeRequest`, its
  :class:`RequestItem` s), and ``by`` decided per document;
* :mod:`~synopsis.pipeline.runner`: :class:`SummarizeRunner`, which runs a request's items on one
  summarizer, reporting through :class:`RunHooks`, each result a :class:`Summary`.
"""

from synopsis.pipeline.reading import ParsedDocument, read_source, sentence_offsets
from synopsis.pipeline.request import BY, DEFAULT_BY, RequestItem, SummarizeRequest, document_items
from synopsis.pipeline.runner import RunHooks, SummarizeRunner, Summary

__all__ = [
    "BY",
    "DEFAULT_BY",
    "ParsedDocument",
    "RequestItem",
    "RunHooks",
    "Summary",
    "SummarizeRequest",
    "SummarizeRunner",
    "document_items",
    "read_source",
    "sentence_offsets",
]
