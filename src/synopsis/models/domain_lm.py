"""LSTM language model with attribute-shared and attribute-specific representations (seed 002).

A domain is a combination of attributes such as ``{"style": "spoken", "topic": "public-affairs"}``. The model
has one *slot* per attribute **value** seen in training, named ``"name=value"`` (``config.attribute_slots``),
so two styles and two topics give N = 4 slots, as in the paper. An input carries a 0/1 mask over the slots;
several slots may be active at once (one per attribute name, normally) or none.

Word representation (variant "in")::

    p'(t) = [p(t); m_1 p(t); ...; m_N p(t)]          (N+1)E dims, fed to the LSTM (U grows to 4H x (N+1)E)

Context representation (variant "out")::

    h'(t) = [h(t); m_1 h(t); ...; m_N h(t)]          (N+1)H dims, before the output layer (V: V x (N+1)H)

The output layer is never materialised on h'(t): with V' = [W_0 W_1 ... W_N],
``V' h' = (W_0 + sum_a m_a W_a) h``, so the logits use one effective V x H matrix per distinct attribute
combination in the batch (there are only a handful), which is exactly the same function at the cost of a
plain LSTM LM's output layer. The first block (``W_0``, and the first E columns of the LSTM's input weights)
is the attribute-shared part; an input with no active slot (all attributes unknown) uses the shared part only.

Attribute values unseen in training have no slot: :meth:`DomainLM.attribute_mask` maps them to zeros (the
shared part only) and warns once per value. Variant "baseline" is the plain LSTM LM (no slots used).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from synopsis.config import from_dict
from synopsis.errors import CheckpointError, ConfigError
from synopsis.training.checkpoint import load_checkpoint, save_checkpoint

VARIANTS = ("baseline", "in", "out", "in_out")

LSTMState = tuple[torch.Tensor, torch.Tensor]


@dataclass
class DomainLMConfig:
    """Sizes, variant and attribute slots. ``attribute_slots`` are ``"name=value"`` strings, in slot order."""

    vocab_size: int
    embedding_dim: int = 100
    hidden_dim: int = 100
    num_layers: int = 1
    dropout: float = 0.5
    variant: str = "in"
    attribute_slots: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.vocab_size < 2 or self.embedding_dim < 1 or self.hidden_dim < 1 or self.num_layers < 1:
            raise ValueError(
                "vocab_size >= 2 and positive embedding_dim, hidden_dim, num_layers are required"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for slot in self.attribute_slots:
            if slot.count("=") < 1 or slot.startswith("="):
                raise ValueError(f"attribute slot {slot!r} must look like 'name=value'")
        if len(set(self.attribute_slots)) != len(self.attribute_slots):
            raise ValueError("attribute_slots contains duplicates")

    @property
    def augment_input(self) -> bool:
        return self.variant in ("in", "in_out")

    @property
    def augment_output(self) -> bool:
        return self.variant in ("out", "in_out")

    @property
    def num_slots(self) -> int:
        return 0 if self.variant == "baseline" else len(self.attribute_slots)


def slot_name(name: str, value: str) -> str:
    return f"{name}={value}"


class DomainLM(nn.Module):
    """Embedding -> [attribute-augmented] LSTM -> [attribute-augmented] softmax output layer."""

    def __init__(self, config: DomainLMConfig) -> None:
        super().__init__()
        self.config = config
        n_blocks_in = config.num_slots + 1 if config.augment_input else 1
        n_blocks_out = config.num_slots + 1 if config.augment_output else 1
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(
            n_blocks_in * config.embedding_dim,
            config.hidden_dim,
            num_layers=config.num_layers,
            batch_first=True,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
        )
        # Block 0 is the shared output matrix, blocks 1..N the attribute-specific ones (V' split by block).
        self.output_weight = nn.Parameter(torch.empty(n_blocks_out, config.vocab_size, config.hidden_dim))
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self._slot_index = {slot: i for i, slot in enumerate(config.attribute_slots)}
        self._warned: set[str] = set()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Uniform(-0.1, 0.1) as in the Zaremba et al. / Mikolov LSTM LM recipes the paper builds on.
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -0.1, 0.1)
        nn.init.zeros_(self.output_bias)

    # ----------------------------------------------------------------------------------------- attributes

    def attribute_mask(self, attributes: Mapping[str, str] | None) -> torch.Tensor:
        """0/1 vector over the slots for an input with these attributes.

        A ``name=value`` without a slot (never seen in training) contributes nothing, so the input falls back
        to the shared representation for that attribute; a warning is issued once per unseen value.
        """
        mask = torch.zeros(len(self.config.attribute_slots))
        for name, value in (attributes or {}).items():
            slot = slot_name(name, value)
            index = self._slot_index.get(slot)
            if index is not None:
                mask[index] = 1.0
            elif slot not in self._warned:
                self._warned.add(slot)
                warnings.warn(
                    f"attribute {slot!r} was not seen in training (slots: {', '.join(self._slot_index)}); "
                    "using the attribute-shared representation for it",
                    UserWarning,
                    stacklevel=2,
                )
        return mask

    # ------------------------------------------------------------------------------------------ forward

    def forward(
        self,
        input_ids: torch.Tensor,
        attribute_mask: torch.Tensor | None = None,
        state: LSTMState | None = None,
    ) -> tuple[torch.Tensor, LSTMState]:
        """Logits (B, T, V) and the LSTM state.

        ``attribute_mask`` is (B, N) for one attribute set per row or (B, T, N) per token; ``None`` means no
        attribute is active (shared part only).
        """
        batch, time = input_ids.shape
        n = self.config.num_slots
        if attribute_mask is None or n == 0:
            mask = input_ids.new_zeros((batch, time, n), dtype=torch.float32)
        else:
            mask = attribute_mask.to(torch.float32)
            if mask.dim() == 2:
                mask = mask.unsqueeze(1).expand(batch, time, mask.shape[-1])
            if mask.shape != (batch, time, len(self.config.attribute_slots)):
                raise ValueError(
                    f"attribute_mask has shape {tuple(attribute_mask.shape)}, expected (B, N) or (B, T, N) "
                    f"with N = {len(self.config.attribute_slots)}"
                )

        embedded = self.embedding(input_ids)  # (B, T, E)
        if self.config.augment_input:
            embedded = self._augment(embedded, mask)  # (B, T, (N+1)E)
        hidden, state = self.lstm(self.dropout(embedded), state)
        hidden = self.dropout(hidden)
        return self._output_logits(hidden, mask), state

    @staticmethod
    def _augment(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[x; m_1 x; ...; m_N x]: one broadcast multiply, no per-attribute loop."""
        gate = torch.cat([mask.new_ones(mask.shape[:-1] + (1,)), mask], dim=-1)  # (B, T, N+1)
        return (gate.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2)

    def _output_logits(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if not self.config.augment_output:
            return F.linear(hidden, self.output_weight[0], self.output_bias)
        # V' h' = (W_0 + sum_a m_a W_a) h: one effective matrix per distinct attribute combination.
        combos, which = torch.unique(mask.reshape(-1, mask.shape[-1]), dim=0, return_inverse=True)
        gates = torch.cat([combos.new_ones(len(combos), 1), combos], dim=1)  # (K, N+1)
        weights = torch.einsum("kn,nvh->kvh", gates, self.output_weight)  # (K, V, H)
        flat = hidden.reshape(-1, hidden.shape[-1])
        if len(combos) == 1:
            logits = F.linear(flat, weights[0], self.output_bias)
        else:
            logits = flat.new_empty(flat.shape[0], self.config.vocab_size)
            for k in range(len(combos)):
                rows = (which == k).nonzero(as_tuple=True)[0]
                logits[rows] = F.linear(flat[rows], weights[k], self.output_bias)
        return logits.view(*hidden.shape[:-1], self.config.vocab_size)

    # --------------------------------------------------------------------------------------- save / load

    def save_pretrained(self, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Weights (safetensors) and config (JSON) into ``directory``; ``extra`` goes to state.json."""
        return save_checkpoint(directory, self.state_dict(), asdict(self.config), state=extra or {})

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> DomainLM:
        checkpoint = load_checkpoint(directory, with_optimizer=False)
        try:
            config = from_dict(DomainLMConfig, checkpoint.config, f"{directory}/config.json")
        except ConfigError as err:
            raise CheckpointError(str(err)) from None
        model = cls(config)
        try:
            model.load_state_dict(checkpoint.model_state)
        except RuntimeError as err:
            raise CheckpointError(f"{directory}: weights do not match config.json ({err})") from None
        return model

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def attribute_slots_from(attribute_sets: Sequence[Mapping[str, str]], names: Sequence[str]) -> list[str]:
    """Sorted ``name=value`` slots for the given attribute names, over the attribute sets seen in training."""
    return sorted({slot_name(k, v) for attrs in attribute_sets for k, v in attrs.items() if k in names})
