"""LSTM language model with attribute-shared and attribute-specific representations.

A domain is a combination of attributes such as ``{"style": "spoken", "topic": "public-affairs"}``. The model
has one *slot* per attribute **value** seen in training, named ``"name=value"`` (``config.attribute_slots``),
so two styles and two topics give N = 4 slots, as in the paper. An input carries a 0/1 mask over the slots;
several slots may be active at once (one per attribute name, normally) or none.

Word representation (variant "in")::

    p'(t) = [p(t); m_1 p(t); ...; m_N p(t)]     (N+1)E dims, fed to the LSTM through U' = [U_0 U_1 ... U_N]

Context representation (variant "out")::

    h'(t) = [h(t); m_1 h(t); ...; m_N h(t)]     (N+1)H dims, before the output layer V' = [W_0 W_1 ... W_N]

The input side is U' p'(t) in one call of PyTorch's fused LSTM kernel for the whole batch, whatever the
attribute combinations of its rows (and of its tokens: a row may cross a document boundary into another
domain inside a BPTT window); the input is p'(t) itself or, when the batch holds fewer than N+1 combinations,
the narrower onehot(combination) (x) p(t) through one U_0 + sum_a m_a U_a block per combination (one domain:
a plain LSTM's input). ``U_0`` is the
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

from synopsis.checkpoint import load_model, save_model
from synopsis.config import from_dict
from synopsis.models.recurrent import LSTMState, fused_lstm

VARIANTS = ("baseline", "in", "out", "in_out")
# Bumped when the parameter layout or the training-time function changes, so that runs recorded with an
# older version are retrained instead of reused (2: U_1..U_N apart from nn.LSTM; one dropout mask on p).
MODEL_VERSION = 2
#: What ``config.json`` of a saved domain LM says it is (see :mod:`synopsis.checkpoint`).
CHECKPOINT_TYPE = "domain-lm"

#: the start of cuDNN's warning about weights that are not one buffer (see ``DomainLM._lstm``)
_NOT_CONTIGUOUS = "RNN module weights are not part of single contiguous chunk of memory"


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
        if mask is None:  # the baseline, no slots, or no attribute given: U' p' = U_0 p and V' h' = W_0 h
            hidden, state = self._lstm(embedded, state, self.lstm.weight_ih_l0)
            return F.linear(self.dropout(hidden), self._shared_output_weight(), self.output_bias), state
        groups = MaskGroups.of(mask)  # the batch's attribute combinations, shared by both sides
        if self.config.augment_input:
            hidden, state = self._augmented_recurrence(embedded, groups, state)
        else:
            hidden, state = self._lstm(embedded, state, self.lstm.weight_ih_l0)
        hidden = self.dropout(hidden)
        if not self.config.augment_output:
            return F.linear(hidden, self._shared_output_weight(), self.output_bias), state
        return self._output_logits(hidden, groups), state

    def _shared_output_weight(self) -> torch.Tensor:
        """W_0 (V x H); a view of the whole parameter when there is only W_0, so that its gradient is the
        output layer's gradient itself (indexing block 0 would allocate and copy a gradient for the stack)."""
        if len(self.output_weight) == 1:
            return self.output_weight.view(self.output_weight.shape[1:])
        return self.output_weight[0]

    def _check_mask(
        self, input_ids: torch.Tensor, attribute_mask: torch.Tensor | None
    ) -> torch.Tensor | None:
        """The float mask, (B, N) when it is constant along each row, else (B, T, N); ``None`` when there is
        no attribute work to do (the baseline, a model without slots or without augmentation, no mask)."""
        if attribute_mask is None or self.config.num_slots == 0:
            return None
        if not (self.config.augment_input or self.config.augment_output):
            return None
        n = len(self.config.attribute_slots)
        expected = (input_ids.shape[0], n) if attribute_mask.dim() == 2 else (*input_ids.shape, n)
        if tuple(attribute_mask.shape) != expected:
            raise ValueError(
                f"attribute_mask has shape {tuple(attribute_mask.shape)}, expected (B, N) or (B, T, N) "
                f"with N = {n}"
            )
        mask = attribute_mask.to(self.embedding.weight.dtype)  # the weights' dtype: float64 models stay so
        # The trainer passes one mask per token; a row that stays in one domain is one row of combinations.
        if mask.dim() == 3 and bool((mask == mask[:, :1]).all()):
            mask = mask[:, 0]
        return mask

    def augmented_input_weight(self) -> torch.Tensor:
        """U' = [U_0 U_1 ... U_N], 4H x (N+1)E: the paper's input matrix."""
        return torch.cat([self.lstm.weight_ih_l0, *self.input_weight], dim=1)

    def _augmented_recurrence(
        self, x: torch.Tensor, groups: MaskGroups, state: LSTMState | None
    ) -> tuple[torch.Tensor, LSTMState]:
        """The LSTM over p'(t) through U' = [U_0 U_1 ... U_N]: one call of PyTorch's fused LSTM kernel for
        the whole batch, whatever the attribute combinations of its rows and tokens (a row may cross a
        document boundary into another domain inside a window). With K distinct combinations in the batch the
        input is the narrower of two exact forms:

        * K <= N+1 (the usual case: a batch cut from the training stream holds two or three domains):
          onehot(combination) (x) p(t), K*E wide, through [U_c1 ... U_cK] with U_c = U_0 + sum_a m_a U_a
          (K = 1: exactly a plain LSTM's input and cost);
        * K > N+1: the paper's p'(t) = [1; m_1; ...; m_N] (x) p(t), (N+1)*E wide, through U'.

        Both are U' p'(t) for every token; the blocks are built from U_0..U_N inside the graph, so the
        gradients are U''s."""
        stacked = torch.cat([self.lstm.weight_ih_l0.unsqueeze(0), self.input_weight])  # (N+1, 4H, E)
        k = len(groups.sizes)
        if k > len(stacked):  # the paper's p' = [1; m] (x) p through one block per slot, U_0..U_N
            gates, blocks = groups.stacked_gates(), stacked
        else:  # onehot(combination) (x) p through one block per combination, U_c
            gates = torch.eye(k, dtype=x.dtype, device=x.device)
            blocks = (groups.stacked_gates() @ stacked.flatten(1)).view(k, *stacked.shape[1:])
        inputs = x if k == 1 else groups.expand(x, gates)
        return self._lstm(inputs, state, blocks.permute(1, 0, 2).flatten(1))  # block j reads input slice j

    def _lstm(
        self, x: torch.Tensor, state: LSTMState | None, weight_ih: torch.Tensor
    ) -> tuple[torch.Tensor, LSTMState]:
        """The model's ``nn.LSTM`` (its fused kernel, all layers) with ``weight_ih`` as the first layer's
        input weight, of any width: ``torch.lstm`` with explicit weights (``nn.LSTM`` checks the width), in
        a dtype every device has a kernel for (:mod:`synopsis.models.recurrent`: autocast's on a GPU, float32
        under CPU autocast, where oneDNN often has no bf16 LSTM kernel)."""
        lstm = self.lstm
        if state is None:
            zeros = x.new_zeros(self.config.num_layers, x.shape[0], self.config.hidden_dim)
            state = (zeros, zeros)
        weights = list(lstm._flat_weights)  # per layer: weight_ih, weight_hh, bias_ih, bias_hh
        weights[0] = weight_ih
        with warnings.catch_warnings():
            # cuDNN warns when the weights are not one contiguous buffer; the augmented weight_ih is made
            # anew every call, so they never are, and cuDNN's one copy of them per call is the cost of U'.
            warnings.filterwarnings("ignore", message=_NOT_CONTIGUOUS)
            output, h_n, c_n = fused_lstm(
                x,
                state,
                weights,
                num_layers=lstm.num_layers,
                dropout=lstm.dropout,
                training=self.training,
                batch_first=lstm.batch_first,
            )
        return output, (h_n, c_n)

    def _output_logits(self, hidden: torch.Tensor, groups: MaskGroups) -> torch.Tensor:
        # V' h' = (W_0 + sum_a m_a W_a) h: one effective matrix per distinct attribute combination, all of
        # them from one matrix product (and one in the backward pass); each group of tokens goes through its
        # own, written straight into the logits.
        batch, time, _ = hidden.shape
        weights = self._effective_output_weights(groups)
        if len(groups.sizes) == 1:
            return F.linear(hidden, weights[0], self.output_bias)
        tokens = groups.over_time(time)
        flat = tokens.sort(hidden.reshape(batch * time, -1))
        # addmm(out=...) is not autocast: use the effective weights' dtype (a matmul's, so autocast's under
        # autocast) for the hidden states and bias too. A no-op in fp32.
        dtype = weights.dtype
        logits = GroupedLinear.apply(flat.to(dtype), weights, self.output_bias.to(dtype), tokens.sizes)
        return tokens.unsort(logits).view(batch, time, -1)

    def _effective_output_weights(self, groups: MaskGroups) -> torch.Tensor:
        """(K, V, H): W_0 + sum_a m_a W_a for each of the batch's K combinations, in one matrix product."""
        blocks = self.output_weight.flatten(1)  # (N+1, V*H)
        return (groups.stacked_gates() @ blocks).view(-1, *self.output_weight.shape[1:])

    # --------------------------------------------------------------------------------------- save / load

    def save_pretrained(self, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Weights (safetensors) and config (JSON) into ``directory``; ``extra`` goes to state.json."""
        return save_model(directory, self, asdict(self.config), CHECKPOINT_TYPE, state=extra or {})

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> DomainLM:
        def build(config: dict[str, Any]) -> DomainLM:
            return cls(from_dict(DomainLMConfig, config, f"{directory}/config.json"))

        return load_model(directory, build, CHECKPOINT_TYPE, kind="checkpoint")[0]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


@dataclass
class MaskGroups:
    """The distinct attribute combinations of a (..., N) mask and the rows (or tokens) that carry each.

    ``masks`` (K, N) holds the combinations in order of first appearance, ``index`` the combination of every
    row (flattened over the mask's leading dimensions, ``shape``) and ``sizes[k]`` how many rows carry
    combination k. Batches cut from one token stream hold each domain in consecutive rows, so the groups are
    usually runs already and ``order`` is ``None`` (slices, no copies); otherwise ``sort`` puts the rows of
    each group together (stable) and ``unsort`` undoes it.
    """

    masks: torch.Tensor
    sizes: list[int]
    index: torch.Tensor
    shape: tuple[int, ...]
    order: torch.Tensor | None = None

    @classmethod
    def of(cls, mask: torch.Tensor) -> MaskGroups:
        rows = mask.reshape(-1, mask.shape[-1])
        # A few dozen rows: grouping them in Python costs less than a chain of small tensor operations.
        combos: dict[tuple[float, ...], int] = {}
        ids = [combos.setdefault(tuple(row), len(combos)) for row in rows.tolist()]
        sizes = [0] * len(combos)
        for k in ids:
            sizes[k] += 1
        runs = 1 + sum(a != b for a, b in zip(ids, ids[1:], strict=False))
        index = torch.tensor(ids, device=mask.device)
        order = None if runs == len(combos) else torch.argsort(index, stable=True)
        masks = rows.new_tensor(list(combos)) if combos else rows.new_zeros(0, rows.shape[1])
        return cls(masks, sizes, index, tuple(mask.shape[:-1]), order)

    def stacked_gates(self) -> torch.Tensor:
        """(K, N+1): a 1 for the shared block, then each group's mask."""
        return torch.cat([self.masks.new_ones(len(self.masks), 1), self.masks], dim=1)

    def sort(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return x if self.order is None else x.index_select(dim, self.order)

    def unsort(self, x: torch.Tensor, dim: int = 0) -> torch.Tensor:
        return x if self.order is None else x.index_select(dim, torch.argsort(self.order))

    def over_time(self, time: int) -> MaskGroups:
        """The grouping of the B*T tokens of a grouping of B rows (row-major, as ``reshape`` flattens)."""
        if len(self.shape) == 2:
            return self
        order = None
        if self.order is not None:
            order = (self.order.unsqueeze(1) * time + torch.arange(time, device=self.order.device)).flatten()
        sizes = [size * time for size in self.sizes]
        return MaskGroups(self.masks, sizes, self.index.repeat_interleave(time), (*self.shape, time), order)

    def per_token_mask(self, time: int) -> torch.Tensor:
        """The mask back as (B, T, N)."""
        mask = self.masks[self.index].view(*self.shape, -1)
        return mask.unsqueeze(1).expand(-1, time, -1) if len(self.shape) == 1 else mask

    def expand(self, x: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
        """``gates[k] (x) x`` for x (B, T, E), each row (token) with the gates (K, W) of its combination k:
        (B, T, W * E), block j of a row being gates[k, j] x."""
        selector = gates[self.index].view(*self.shape, -1)
        if len(self.shape) == 1:
            selector = selector.unsqueeze(1)  # (B, 1, W): one combination per row
        return (selector.unsqueeze(-1) * x.unsqueeze(2)).flatten(2)


class GroupedLinear(torch.autograd.Function):
    """``x`` (R, H) in consecutive groups of ``sizes`` rows, group k through ``weights[k]`` (V, H) plus
    ``bias``: (R, V). Same as concatenating ``F.linear`` per group, without copying the pieces together
    (forward: the logits; backward: the K weight gradients, which arrive stacked as ``weights`` is)."""

    @staticmethod
    def forward(ctx, x, weights, bias, sizes):  # type: ignore[override]
        out = x.new_empty(x.shape[0], weights.shape[1])
        for weight, x_k, out_k in zip(weights, x.split(sizes), out.split(sizes), strict=True):
            torch.addmm(bias, x_k, weight.t(), out=out_k)
        ctx.save_for_backward(x, weights)
        ctx.sizes = sizes
        return out

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        x, weights = ctx.saved_tensors
        grad = grad.contiguous()
        pieces = grad.split(ctx.sizes)
        grad_x = grad_weights = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.empty_like(x)
            for weight, g_k, out in zip(weights, pieces, grad_x.split(ctx.sizes), strict=True):
                torch.mm(g_k, weight, out=out)
        if ctx.needs_input_grad[1]:
            grad_weights = torch.empty_like(weights)
            for g_k, x_k, out in zip(pieces, x.split(ctx.sizes), grad_weights, strict=True):
                torch.mm(g_k.t(), x_k, out=out)
        if ctx.needs_input_grad[2]:
            grad_bias = grad.sum(0)
        return grad_x, grad_weights, grad_bias, None


def attribute_slots_from(attribute_sets: Sequence[Mapping[str, str]], names: Sequence[str]) -> list[str]:
    """Sorted ``name=value`` slots for the given attribute names, over the attribute sets seen in training."""
    return sorted({slot_name(k, v) for attrs in attribute_sets for k, v in attrs.items() if k in names})
