"""LSTM language model with attribute-shared and attribute-specific representations.

A domain is a combination of attributes such as ``{"style": "spoken", "topic": "public-affairs"}``. The model
has one *slot* per attribute **value** seen in training, named ``"name=value"`` (``config.attribute_slots``),
so two styles and two topics give N = 4 slots, as in the paper. An input carries a 0/1 mask over the slots;
several slots may be active at once (one per attribute name, normally) or none.

Word representation (variant "in")::

    p'(t) = [p(t); m_1 p(t); ...; m_N p(t)]     (N+1)E dims, fed to the LSTM through U' = [U_0 U_1 ... U_N]

Context representation (variant "out")::

    h'(t) = [h(t); m_1 h(t); ...; m_N h(t)]     (N+1)H dims, before the output layer V' = [W_0 W_1 ... W_N]

The input side is computed as the paper writes it: p'(t) is built (B x T x (N+1)E) and fed through U' in one
call of PyTorch's fused LSTM kernel for the whole batch, whatever the attribute combinations of its rows (and
of its tokens: a row may cross a document boundary into another domain inside a BPTT window). ``U_0`` is the
``nn.LSTM``'s own input weight and ``U_1..U_N`` are ``input_weight``. The output layer is linear in h'(t), so
``V' h' = (W_0 + sum_a m_a W_a) h``: one effective V x H matrix per distinct attribute combination (a batch
has only a handful), the paper's function without materialising h'; ``W_0..W_N`` are ``output_weight``. Tests
check both against the concatenated equations. An input with no active slot (all attributes unknown) uses the
shared blocks only; the baseline does no attribute work at all.

Dropout on the LSTM's input is applied to p(t) *before* it is copied into the attribute blocks, so that
p_a(t) = p(t) holds during training as the paper defines it (one dropout mask, not N+1 independent ones).

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

from synopsis.checkpoint import load_checkpoint, save_checkpoint
from synopsis.config import from_dict
from synopsis.errors import CheckpointError, ConfigError

VARIANTS = ("baseline", "in", "out", "in_out")
# Bumped when the parameter layout or the training-time function changes, so that runs recorded with an
# older version are retrained instead of reused (2: U_1..U_N apart from nn.LSTM; one dropout mask on p).
MODEL_VERSION = 2

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
        n_slots_in = config.num_slots if config.augment_input else 0
        n_blocks_out = config.num_slots + 1 if config.augment_output else 1
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        # weight_ih_l0 is the shared input block U_0.
        self.lstm = nn.LSTM(
            config.embedding_dim,
            config.hidden_dim,
            num_layers=config.num_layers,
            batch_first=True,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
        )
        # U_1..U_N: the attribute-specific input blocks of U' (4H x E each).
        self.input_weight = nn.Parameter(torch.empty(n_slots_in, 4 * config.hidden_dim, config.embedding_dim))
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
        # One dropout mask on p(t), shared by its copies p_a(t) (see the module docstring).
        embedded = self.dropout(self.embedding(input_ids))  # (B, T, E)
        mask = self._check_mask(input_ids, attribute_mask)
        if mask is not None and self.config.augment_input:
            hidden, state = self._augmented_recurrence(embedded, mask, state)
        else:  # the baseline, variant "out", or no attribute given: U' p' = U_0 p
            hidden, state = self.lstm(embedded, state)
        hidden = self.dropout(hidden)
        if mask is None or not self.config.augment_output:
            return F.linear(hidden, self.output_weight[0], self.output_bias), state
        if mask.dim() == 2:
            mask = mask.unsqueeze(1).expand(*input_ids.shape, mask.shape[-1])
        return self._output_logits(hidden, mask), state

    def _check_mask(
        self, input_ids: torch.Tensor, attribute_mask: torch.Tensor | None
    ) -> torch.Tensor | None:
        """The (B, N) or (B, T, N) float mask, or ``None`` when there is no attribute work to do (the
        baseline, a model without slots, or no mask given)."""
        if attribute_mask is None or self.config.num_slots == 0:
            return None
        n = len(self.config.attribute_slots)
        expected = (input_ids.shape[0], n) if attribute_mask.dim() == 2 else (*input_ids.shape, n)
        if tuple(attribute_mask.shape) != expected:
            raise ValueError(
                f"attribute_mask has shape {tuple(attribute_mask.shape)}, expected (B, N) or (B, T, N) "
                f"with N = {n}"
            )
        return attribute_mask.to(torch.float32)

    def augmented_input_weight(self) -> torch.Tensor:
        """U' = [U_0 U_1 ... U_N], 4H x (N+1)E: the paper's input matrix."""
        return torch.cat([self.lstm.weight_ih_l0, *self.input_weight], dim=1)

    def _augmented_recurrence(
        self, x: torch.Tensor, mask: torch.Tensor, state: LSTMState | None
    ) -> tuple[torch.Tensor, LSTMState]:
        """The LSTM over p'(t) with U' = [U_0 U_1 ... U_N] as input weight: one call of PyTorch's fused LSTM
        kernel for the whole batch, whatever the attribute combinations of its rows and tokens (a mask may
        change inside a window, at a document boundary).

        The input is ``selector (x) p`` through the matching weight blocks, in the narrower of two exact
        forms:
        the paper's p'(t) = [1; m_1; ...; m_N] (x) p(t) through U' ((N+1)E wide), or, when the batch holds
        fewer than N+1 distinct attribute combinations (the usual case: a batch cut from the training stream
        holds two or three domains), onehot(combination) (x) p(t) through [U_c1 ... U_cK] with
        U_c = U_0 + sum_a m_a U_a (KE wide; one domain: exactly a plain LSTM's cost). Both are
        ``U' p'(t)`` for every token; the blocks are built from U_0..U_N inside the graph, so the gradients
        are U''s."""
        n = mask.shape[-1]
        blocks = torch.cat([self.lstm.weight_ih_l0.unsqueeze(0), self.input_weight])  # (N+1, 4H, E)
        selector = torch.cat([mask.new_ones(*mask.shape[:-1], 1), mask], dim=-1)  # (..., N+1): [1; m]
        binary = bool(((mask == 0) | (mask == 1)).all())
        if binary and n < 24:  # 0/1 masks: one integer code per combination, exact in float32
            codes = mask @ (2.0 ** torch.arange(n, device=mask.device, dtype=mask.dtype))
            unique, inverse = torch.unique(codes, return_inverse=True)
            if len(unique) < n + 1:
                first = torch.zeros(len(unique), dtype=torch.long, device=mask.device)
                first.scatter_(0, inverse.flatten(), torch.arange(inverse.numel(), device=mask.device))
                combos = selector.reshape(-1, n + 1)[first]  # (K, N+1) the [1; m] of each combination
                blocks = (combos @ blocks.flatten(1)).view(len(unique), *blocks.shape[1:])  # U_c per combo
                selector = F.one_hot(inverse, len(unique)).to(x.dtype)
        if selector.dim() == 2:
            selector = selector.unsqueeze(1)  # (B, 1, width): one selection per row
        if selector.shape[-1] == 1:  # one combination: the plain LSTM input
            augmented = x
        else:
            augmented = (selector.unsqueeze(-1) * x.unsqueeze(2)).flatten(2)  # (B, T, width * E)
        if state is None:
            zeros = x.new_zeros(self.config.num_layers, x.shape[0], self.config.hidden_dim)
            state = (zeros, zeros)
        lstm = self.lstm
        weights = list(lstm._flat_weights)  # per layer: weight_ih, weight_hh, bias_ih, bias_hh
        weights[0] = blocks.permute(1, 0, 2).flatten(1)  # (4H, width * E), block k reads slot k of the input
        # torch.lstm is nn.LSTM's kernel with explicit weights (nn.LSTM itself checks the input width).
        output, h_n, c_n = torch.lstm(
            augmented,
            state,
            weights,
            lstm.bias,
            lstm.num_layers,
            float(lstm.dropout),
            self.training,
            lstm.bidirectional,
            lstm.batch_first,
        )
        return output, (h_n, c_n)

    def _output_logits(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # V' h' = (W_0 + sum_a m_a W_a) h: one effective matrix per distinct attribute combination, all of
        # them from one matrix product (and one in the backward pass).
        flat = hidden.reshape(-1, hidden.shape[-1])
        groups = MaskGroups.of(mask.reshape(-1, mask.shape[-1]))
        blocks = self.output_weight.flatten(1)  # (N+1, V*H)
        weights = (groups.stacked_gates() @ blocks).view(-1, *self.output_weight.shape[1:]).unbind(0)
        logits = [
            F.linear(h_k, weight, self.output_bias)
            for weight, h_k in zip(weights, groups.sort(flat).split(groups.sizes), strict=True)
        ]
        return groups.unsort(torch.cat(logits)).view(*hidden.shape[:-1], self.config.vocab_size)

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


@dataclass
class MaskGroups:
    """Rows of a (R, N) attribute mask grouped by value: ``sizes[k]`` rows with mask ``masks[k]``.

    Batches cut from one token stream hold each domain in consecutive rows, so the groups are usually
    runs already and ``order`` is ``None`` (slices, no copies); otherwise rows are sorted by mask first.
    """

    masks: list[torch.Tensor]
    sizes: list[int]
    order: torch.Tensor | None = None

    @classmethod
    def of(cls, mask: torch.Tensor) -> MaskGroups:
        if bool((mask == mask[0]).all()):
            return cls([mask[0]], [len(mask)])
        starts = torch.cat([mask.new_ones(1, dtype=torch.bool), (mask[1:] != mask[:-1]).any(dim=-1)])
        starts = starts.nonzero().flatten()
        # torch.unique(dim=0) is slow on CPU: only look at the runs' first rows unless masks repeat.
        if len(torch.unique(mask[starts], dim=0)) == len(starts):  # each mask is one run of rows
            sizes = torch.diff(starts, append=starts.new_tensor([len(mask)]))
            return cls(list(mask[starts]), sizes.tolist())
        unique, which = torch.unique(mask, dim=0, return_inverse=True)
        order = torch.argsort(which, stable=True)
        return cls(list(unique), torch.bincount(which).tolist(), order)

    def stacked_gates(self) -> torch.Tensor:
        """(K, N+1): a 1 for the shared block, then each group's mask."""
        masks = torch.stack(self.masks)
        return torch.cat([masks.new_ones(len(masks), 1), masks], dim=1)

    def sort(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return x if self.order is None else x.index_select(dim, self.order)

    def unsort(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return x if self.order is None else x.index_select(dim, torch.argsort(self.order))


def attribute_slots_from(attribute_sets: Sequence[Mapping[str, str]], names: Sequence[str]) -> list[str]:
    """Sorted ``name=value`` slots for the given attribute names, over the attribute sets seen in training."""
    return sorted({slot_name(k, v) for attrs in attribute_sets for k, v in attrs.items() if k in names})
