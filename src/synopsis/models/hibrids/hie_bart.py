"""HIBRIDS stacked on Hie-BART: sentence-level heads and section-tree biases in one BART.

Registered as ``hibrids_hie_bart``.

The methods compose at the attention: Hie-BART's encoder self-attention (Akiyama et al., 2021) takes an
additive per-head term on its word heads' scores (``attention_bias``), and HIBRIDS (Cao & Wang, ACL 2022,
section 3) hands it its section-pair bias there; the sentence heads attend over sentences, so the bias has
no say there. The decoder is HIBRIDS' (the HIBRIDS-DEC bias on the last cross-attention). Hence:

* with zero tables the model is Hie-BART (bit for bit under eager);
* with every head word-level it is HIBRIDS on BART;
* ``convert hibrids`` on a Hie-BART checkpoint and ``convert hie-bart`` on a HIBRIDS BART both give this
  type (the config carries both methods' fields).
"""

from __future__ import annotations

from typing import Any

from huggingface_hub.dataclasses import strict

from synopsis.models.bases import AdaptedBartForConditionalGeneration, AdaptedBartModel, method_classes
from synopsis.models.hibrids.bart import HibridsBartDecoder, HibridsBartEncoder
from synopsis.models.hibrids.bias import HibridsBias, HibridsConfigMixin, token_pair_bias
from synopsis.models.hibrids.relations import SectionLayout, num_buckets
from synopsis.models.hie_bart import HieBartAttention, HieBartConfig, HieBartEncoder


@strict
class HibridsHieBartConfig(HibridsConfigMixin, HieBartConfig):
    """:class:`~synopsis.models.hie_bart.HieBartConfig` (``word_heads``, the sentence-start token) plus
    HIBRIDS' fields (``hibrids_encoder``, ``hibrids_decoder``, ``hibrids_selected``)."""

    model_type = "hibrids_hie_bart"


class HibridsHieBartAttention(HieBartAttention):
    """Hie-BART's encoder self-attention with HIBRIDS' per-head table on its word heads."""

    def __init__(self, config: HibridsHieBartConfig, layer_idx: int | None = None) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.hibrids_bias: HibridsBias | None = None  # no table without HIBRIDS-ENC
        if config.hibrids_encoder:
            self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.num_heads)

    def forward(self, *args: Any, hibrids_layout: SectionLayout | None = None, **kwargs: Any) -> Any:
        """Hie-BART's forward; the section layout becomes its ``attention_bias``."""
        if hibrids_layout is not None and self.hibrids_bias is not None:
            kwargs["attention_bias"] = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        return super().forward(*args, **kwargs)


class HibridsHieBartEncoder(HibridsBartEncoder, HieBartEncoder):
    """Hie-BART's encoder (sentences found once per pass) whose layers also get the section layout."""

    self_attention_class = HibridsHieBartAttention


HibridsHieBartModel, HibridsHieBartForConditionalGeneration = method_classes(
    __name__,
    "HibridsHieBart",
    HibridsHieBartConfig,
    (AdaptedBartModel, AdaptedBartForConditionalGeneration),
    "Hie-BART with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate.",
    encoder_class=HibridsHieBartEncoder,
    decoder_class=HibridsBartDecoder,
)
