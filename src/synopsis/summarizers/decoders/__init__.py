"""What decodes a Hugging Face seq2seq checkpoint: a :class:`~synopsis.summarizers.decoders.base.Decoder`, the
part of :class:`~synopsis.summarizers.seq2seq.Seq2SeqSummarizer` that turns encoded inputs into summary
token ids (OpenNMT-py keeps its translator apart from its models the same way).

:data:`DECODERS` is the one table of backends (``--backend``, the service's ``options.backend``): each row
names its decoder class as ``"module:Class"`` (imported only when a model loads on it, as transformers' Auto
mappings name theirs) and the load option that sets its precision. ``auto`` (the default) is not a row: it
decodes each call with CTranslate2 where that writes ``generate()``'s tokens for the options asked, else with
torch (:mod:`synopsis.summarizers.decoders.auto`). A new backend is one module with its decoder and one row
here; the CLI's flag, the service's schema and :func:`~synopsis.summarizers.check_backend` read the table.

Importing this package loads no decoder (and neither torch nor CTranslate2).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Backend:
    """One backend: its ``--backend`` name, its decoder (``"module:Class"``, whose ``from_pretrained`` loads
    it), the load option that sets its precision and the values it takes (``precisions[0]``: its default,
    ``None``: as stored), and the module an optional extra installs for it (``requires``, from the pip
    ``extra``)."""

    name: str
    decoder: str
    precision_option: str
    precisions: tuple[str, ...]
    requires: str | None = None
    extra: str | None = None
    #: whether it runs only stock checkpoints (no method's attention: HIBRIDS, Hie-BART, InstructSum)
    stock_only: bool = False
    #: what it is, for ``--backend``'s help
    help: str = ""
    #: the load settings it takes besides the device and its precision (``instruction_cache``: torch's)
    load_options: tuple[str, ...] = ()

    def decoder_class(self) -> Any:
        module, _, name = self.decoder.partition(":")
        return getattr(importlib.import_module(module), name)

    def installed(self) -> bool:
        return self.requires is None or importlib.util.find_spec(self.requires) is not None


#: Every backend, by name (see the module docstring).
DECODERS = {
    "torch": Backend(
        "torch",
        "synopsis.summarizers.decoders.generate:GenerateDecoder",
        "dtype",
        ("fp32", "bf16", "fp16"),
        help="generate(); every checkpoint and method",
        load_options=("instruction_cache",),
    ),
    "ctranslate2": Backend(
        "ctranslate2",
        "synopsis.summarizers.decoders.ct2:CTranslate2Decoder",
        "compute_type",
        ("float32", "int8", "int8_float32"),
        requires="ctranslate2",
        extra="ct2",
        stock_only=True,
        help="stock BART/PEGASUS/T5-family checkpoints converted once and cached beside the model; the same "
        "summaries in float32, faster on a CPU",
    ),
}
#: What ``--backend`` takes: ``auto`` (the default), then every row of :data:`DECODERS`.
AUTO = "auto"
BACKENDS = (AUTO, *DECODERS)
DEFAULT_BACKEND = AUTO
AUTO_HELP = (
    "the default: ctranslate2 where the ct2 extra is installed and it writes generate()'s tokens for the "
    "options asked, e.g. not n-gram blocking under beams; torch otherwise; the log says which"
)
#: A torch model's ``--dtype`` values (its weights cast when loaded; ``None``: as stored).
INFERENCE_DTYPES = DECODERS["torch"].precisions
#: CTranslate2's ``--compute-type`` values (``float32``, its default, writes ``generate()``'s tokens).
COMPUTE_TYPES = DECODERS["ctranslate2"].precisions
