"""Pointer-generator network with coverage (See, Liu and Manning, ACL 2017).

One file, config in / tensors out. Notation follows See et al. (ACL 2017), sections 2.1-2.3:

* encoder: one bidirectional LSTM over word embeddings -> ``h_i`` (2H); its final states are reduced to the
  decoder's initial state by a linear layer + ReLU (as the authors' code does);
* decoder: one LSTM cell whose input is ``x_t = W_x [emb(y_{t-1}); h*_{t-1}]`` (input feeding);
  its state is ``s_t = [h_t; c_t]``;
* attention with coverage: ``e_i^t = v^T tanh(W_h h_i + W_s s_t + w_c c_i^t + b)``, softmax over non-pad
  positions; ``c^t = sum_{t' < t} a^{t'}``;
* ``P_vocab = softmax(V'(V [h_t; h*_t] + b) + b')``, ``p_gen = sigmoid(w [h*_t; s_t; x_t] + b_ptr)``;
* final distribution over the extended vocabulary (fixed vocabulary + this article's OOVs):
  ``P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t`` (``scatter_add`` sums duplicates);
* loss: mean over target steps of ``-log P(w*_t) + lambda sum_i min(a_i^t, c_i^t)``, per summary, then
  averaged over the batch's summaries.

``pointer=False`` gives the plain attention seq2seq baseline (P = P_vocab over the fixed vocabulary),
``coverage=False`` drops the coverage feature and loss, so the paper's three systems are one flag apart.

The copy mixture and its loss are one module, :class:`CopyMixture`, used by both the teacher-forced loss and
:meth:`PointerGenerator.decode_step`; the lowercased word tokens and ids that training and summarization feed
the model come from one place too (:mod:`synopsis.data.pointer_generator`); the attention energy and the
copy mixture live in :mod:`synopsis.models.copy_attention`.

Decoding lives in :mod:`synopsis.generation`; this module exposes the step function it needs:
:meth:`PointerGenerator.encode` once, then :meth:`PointerGenerator.decode_step` per token.
:class:`PointerGeneratorEnsemble` (``config.ensemble_size > 1``, not in the paper) decodes several models of
one vocabulary as one, through the same two methods: each step's final distribution is the mean of theirs.

Where the time goes on CPU, and what is done about it (the functions are unchanged):

* the encoder is PyTorch's fused LSTM (``torch.lstm``, the kernel behind ``nn.LSTM``; cuDNN on GPUs; float32
  under CPU autocast, see :mod:`synopsis.models.recurrent`) on right-aligned rows, with padding made an exact
  no-op (see :meth:`PointerGenerator._bidirectional`), instead of a packed sequence, whose CPU backward is
  quadratic in the length;
* ``W_h h_i`` is computed once per source; the rest of the attention energy is per step and is one custom
  autograd function (:class:`AttentionEnergy`) that writes the (B, L, 2H) pre-activation into one reused
  buffer and recomputes it in the backward pass instead of keeping one such tensor per target step;
* in a beam search the K hypotheses of a source read its one encoder output (states, features, mask) by
  broadcasting, not K copies of it: the per-step attention reads a K-th of the memory it did, and the search
  copies nothing per beam;
* ``tanh(x) = 2 sigmoid(2x) - 1``: PyTorch's CPU ``tanh`` is ~3x slower than its ``sigmoid``, and the constant
  ``-1`` only shifts every energy of a row by ``sum(v)``, which the softmax ignores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from synopsis.checkpoint import CONFIG_FILE, load_model, save_model
from synopsis.data.pointer_generator import (
    Batch,
    SourceProfile,
    document_words,
    encode_batch,
    known_word_rate,
    source_profile,
    summary_words,
)
from synopsis.errors import CheckpointError, ConfigError
from synopsis.models.copy_attention import AttentionEnergy, CopyMixture
from synopsis.models.recurrent import fused_lstm

if TYPE_CHECKING:
    from synopsis.vocab import Vocab

# The inputs moved to synopsis.data.pointer_generator; their old import path keeps working.
__all__ = [
    "Batch",
    "CHECKPOINT_TYPE",
    "PointerGenerator",
    "PointerGeneratorConfig",
    "PointerGeneratorEnsemble",
    "SourceProfile",
    "config_for_vocab",
    "document_words",
    "encode_batch",
    "init_weights",
    "known_word_rate",
    "source_profile",
    "summary_words",
]

VOCAB_FILE = "vocab.txt"
#: What ``config.json`` of a saved pointer-generator says it is (see :mod:`synopsis.checkpoint`).
CHECKPOINT_TYPE = "pointer-generator"

# Input-gate pre-activation added at padding steps of the encoder: sigmoid(-1e4) is exactly 0 in fp32 and
# fp16, so from a zero state a padding step gives c = f * 0 + 0 * g = 0 and h = o * tanh(0) = 0 exactly.
# Finite (not -inf) so that the 0 * weight products at real tokens stay 0 instead of NaN.
_CLOSED_GATE = -1e4


@dataclass
class PointerGeneratorConfig:
    """Architecture and the ids of the special tokens (taken from the vocabulary, never hard-coded)."""

    vocab_size: int
    embedding_dim: int = 128
    hidden_dim: int = 256
    pointer: bool = True
    coverage: bool = False
    coverage_loss_weight: float = 1.0
    dropout: float = 0.0  # the paper uses no regularisation; small corpora benefit from some
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    vocab_fingerprint: str = ""
    source_profile: SourceProfile | None = None  # the inputs it was validated on (None: not recorded)
    # > 1: the checkpoint holds this many models of this shape, decoded as an ensemble (members.K.* weights)
    ensemble_size: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_dim", "hidden_dim", "ensemble_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for name in ("pad_id", "unk_id", "bos_id", "eos_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(
                    f"{name} {getattr(self, name)} is outside the vocabulary of {self.vocab_size}"
                )


@dataclass
class EncoderOutput:
    """What every decoder step reads, one row per source (the decoder's K hypotheses of a source share it)."""

    states: torch.Tensor  # (B, L, 2H) h_i
    features: torch.Tensor  # (B, L, 2H) 2 W_h h_i, precomputed once (doubled: see the module docstring)
    mask: torch.Tensor  # (B, L) True at real tokens
    extended_ids: torch.Tensor  # (B, L) source ids in the extended vocabulary (for copying)
    num_oovs: int  # size of the largest OOV list in the batch
    # Scratch space for the attention pre-activation (B, K, L, 2H), reused by every step on this source (never
    # an input: not copied when a search drops documents, it is re-made at the new size).
    workspace: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)


@dataclass
class DecoderState:
    h: torch.Tensor  # (B, H)
    c: torch.Tensor  # (B, H)
    context: torch.Tensor  # (B, 2H) h*_{t-1}, fed into the next step
    coverage: torch.Tensor  # (B, L) c^t, zeros when coverage is off


@dataclass
class StepOutput:
    probs: torch.Tensor  # (B, V + num_oovs) final distribution (V only when the pointer is off)
    attention: torch.Tensor  # (B, L) a^t
    coverage: torch.Tensor  # (B, L) c^t, the coverage *before* adding a^t
    p_gen: torch.Tensor  # (B,)
    state: DecoderState | tuple[DecoderState, ...]  # one per member for an ensemble


@dataclass
class ForwardOutput:
    loss: torch.Tensor  # scalar: nll + coverage_loss_weight * coverage_loss (when coverage is on)
    nll: torch.Tensor  # scalar: mean over summaries of the mean over each one's target tokens
    coverage_loss: torch.Tensor  # scalar: sum_i min(a_i, c_i), averaged as nll
    num_summaries: int  # rows with at least one target token (the loss's denominator)
    num_tokens: int
    token_nll: torch.Tensor  # (B, T) per-token -log P(w*), zeros at padding


class PointerGenerator(nn.Module):
    def __init__(self, config: PointerGeneratorConfig) -> None:
        super().__init__()
        if config.ensemble_size != 1:
            raise ValueError(f"ensemble_size {config.ensemble_size}: build a PointerGeneratorEnsemble")
        self.config = config
        e, h, v = config.embedding_dim, config.hidden_dim, config.vocab_size
        self.embedding = nn.Embedding(v, e, padding_idx=config.pad_id)  # shared by encoder and decoder
        self.encoder = nn.LSTM(e, h, num_layers=1, batch_first=True, bidirectional=True)
        self.reduce_h = nn.Linear(2 * h, h)
        self.reduce_c = nn.Linear(2 * h, h)
        self.decoder_input = nn.Linear(e + 2 * h, e)
        self.decoder = nn.LSTMCell(e, h)
        # Attention: W_h (on encoder states, no bias), W_s (on s_t = [h_t; c_t], carries b_attn), w_c, v.
        self.attn_encoder = nn.Linear(2 * h, 2 * h, bias=False)
        self.attn_decoder = nn.Linear(2 * h, 2 * h)
        self.attn_coverage = nn.Linear(1, 2 * h, bias=False)
        self.attn_v = nn.Linear(2 * h, 1, bias=False)
        self.p_gen_linear = nn.Linear(2 * h + 2 * h + e, 1)  # [h*_t; s_t; x_t]
        self.out_hidden = nn.Linear(h + 2 * h, h)  # V [h_t; h*_t] + b
        self.out_vocab = nn.Linear(h, v)  # V' . + b'
        self.dropout = nn.Dropout(config.dropout)
        self.copy = CopyMixture(config)  # no parameters: the state dict keys are unchanged

    # ------------------------------------------------------------------ encoder
    def encode(
        self, input_ids: torch.Tensor, extended_ids: torch.Tensor | None = None, num_oovs: int = 0
    ) -> tuple[EncoderOutput, DecoderState]:
        """Run the encoder. ``input_ids`` (B, L) use UNK for OOVs; padding is ``config.pad_id`` at the end."""
        cfg = self.config
        mask = input_ids.ne(cfg.pad_id)
        embedded = self.dropout(self.embedding(input_ids))
        states, h_n, c_n = self._bidirectional(embedded, mask)
        # Final states of both directions (B, 2H) -> reduced to the decoder's H.
        h0 = F.relu(self.reduce_h(h_n))
        c0 = F.relu(self.reduce_c(c_n))
        encoder_output = EncoderOutput(
            states=states,
            features=2.0 * self.attn_encoder(states),
            mask=mask,
            extended_ids=input_ids if extended_ids is None else extended_ids,
            num_oovs=num_oovs if cfg.pointer else 0,
        )
        batch, length = input_ids.shape
        state = DecoderState(
            h=h0,
            c=c0,
            context=states.new_zeros(batch, 2 * cfg.hidden_dim),
            coverage=states.new_zeros(batch, length),
        )
        return encoder_output, state

    def _bidirectional(
        self, embedded: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The bidirectional encoder over a padded batch, exactly as over a packed sequence: outputs
        (B, L, 2H) with zeros at padding, and final (h, c) of both directions (B, 2H) taken after each row's
        own tokens.

        Rows are right-aligned (padding first), and a padding step is an exact no-op on the zero initial
        state: an extra input feature, 1 at padding, drives the input gate to exactly 0 through a fixed
        ``_CLOSED_GATE`` weight. Then both directions are one fused LSTM call each, whose final state is
        every row's: the forward direction reads the rows rolled right by their padding, the backward one
        reads them flipped (which reverses every row within its length and puts its padding first).
        Not a packed sequence: its CPU backward zero-fills a copy of the whole packed input at every step,
        quadratic in the length."""
        batch, length, dim = embedded.shape
        positions = torch.arange(length, device=embedded.device)
        padding = length - mask.sum(1, keepdim=True)  # (B, 1)
        closed = positions.lt(padding).unsqueeze(-1).to(embedded.dtype)  # (B, L, 1) leading padding
        roll = (positions - padding) % length  # row b rolled right by its padding
        forward_in = embedded.gather(1, roll.unsqueeze(-1).expand(-1, -1, dim))
        forward_out, h_fw, c_fw = self._encoder_direction(forward_in, closed, "")
        backward_out, h_bw, c_bw = self._encoder_direction(embedded.flip(1), closed, "_reverse")
        unroll = (positions + padding) % length  # back to left-aligned; padding lands on zero outputs
        forward_out = forward_out.gather(1, unroll.unsqueeze(-1).expand(-1, -1, forward_out.size(-1)))
        states = torch.cat([forward_out, backward_out.flip(1)], dim=-1)
        return states, torch.cat([h_fw, h_bw], dim=-1), torch.cat([c_fw, c_bw], dim=-1)

    def _encoder_direction(
        self, inputs: torch.Tensor, closed: torch.Tensor, suffix: str
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One direction of ``self.encoder`` (its own weights) over right-aligned rows, from a zero state."""
        lstm = self.encoder
        w_ih = getattr(lstm, f"weight_ih_l0{suffix}")
        hidden = w_ih.size(0) // 4
        gate = w_ih.new_zeros(4 * hidden, 1)
        gate[:hidden] = _CLOSED_GATE  # PyTorch's gate order is i, f, g, o
        weights = [
            torch.cat([w_ih, gate], dim=1),
            getattr(lstm, f"weight_hh_l0{suffix}"),
            getattr(lstm, f"bias_ih_l0{suffix}"),
            getattr(lstm, f"bias_hh_l0{suffix}"),
        ]
        zeros = inputs.new_zeros(1, inputs.size(0), hidden)
        # nn.LSTM's kernel with explicit weights (one layer, one direction, batch first), in a dtype every
        # device has a kernel for (float32 under CPU autocast).
        outputs, h_n, c_n = fused_lstm(
            torch.cat([inputs, closed], dim=-1), (zeros, zeros), weights, training=self.training
        )
        return outputs, h_n[0], c_n[0]

    # ------------------------------------------------------------------ one decoder step
    def _attention(
        self, s_t: torch.Tensor, encoder: EncoderOutput, coverage: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention (N, L) and context (N, 2H) of N decoder rows over ``encoder``'s B sources, N = B K: the K
        hypotheses of a source are consecutive rows and read its one copy of the encoder states."""
        features = encoder.features
        batch, length, dim = features.shape
        k = s_t.size(0) // batch
        if k * batch != s_t.size(0):
            raise ValueError(f"{s_t.size(0)} decoder rows for {batch} sources: expected a multiple")
        shape = (batch, k, length, dim)
        if encoder.workspace is None or encoder.workspace.shape != shape:
            encoder.workspace = features.new_empty(shape)
        # One dtype for the custom function, whose backward runs outside autocast: the features' (bf16 under
        # autocast, as the workspace). A no-op in fp32; coverage itself stays accumulated in fp32.
        dtype = features.dtype
        scores = AttentionEnergy.apply(
            features,
            2.0 * self.attn_decoder(s_t).to(dtype),
            coverage.to(dtype) if self.config.coverage else None,
            2.0 * self.attn_coverage.weight.squeeze(-1).to(dtype),
            2.0 * self.attn_v.weight.squeeze(0).to(dtype),
            encoder.workspace,
        )
        # Masked softmax with a finite fill (exp underflows to exactly 0) and a final multiply by the mask:
        # an all-pad row (empty article) gets all-zero attention instead of the NaN of softmax(-inf, ...).
        mask = encoder.mask.unsqueeze(1)
        scores = scores.view(batch, k, length).masked_fill(~mask, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1) * mask
        context = torch.bmm(attention, encoder.states)  # (B, K, 2H): one product per source
        return attention.view(-1, length), context.view(batch * k, -1)

    def _recurrent_step(
        self, prev_ids: torch.Tensor, state: DecoderState, encoder: EncoderOutput
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DecoderState]:
        """The sequential part of a step: LSTM, attention, p_gen. Returns (output features [h_t; h*_t],
        attention a^t, p_gen, new state); the vocabulary projection is left to the caller so that teacher
        forcing can run it once for all steps."""
        cfg = self.config
        prev_ids = prev_ids.masked_fill(prev_ids >= cfg.vocab_size, cfg.unk_id)  # copied OOVs are read as UNK
        embedded = self.dropout(self.embedding(prev_ids))
        x_t = self.decoder_input(torch.cat([embedded, state.context], dim=-1))
        h_t, c_t = self.decoder(x_t, (state.h, state.c))
        s_t = torch.cat([h_t, c_t], dim=-1)
        attention, context = self._attention(s_t, encoder, state.coverage)
        if cfg.pointer:
            p_gen = torch.sigmoid(self.p_gen_linear(torch.cat([context, s_t, x_t], dim=-1))).squeeze(-1)
        else:
            p_gen = h_t.new_ones(h_t.size(0))
        new_coverage = state.coverage + attention if cfg.coverage else state.coverage
        features = torch.cat([h_t, context], dim=-1)
        return features, attention, p_gen, DecoderState(h=h_t, c=c_t, context=context, coverage=new_coverage)

    def _vocab_logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.out_vocab(self.out_hidden(self.dropout(features)))

    def decode_step(self, prev_ids: torch.Tensor, state: DecoderState, encoder: EncoderOutput) -> StepOutput:
        """One decoder step of N rows (``prev_ids`` (N,), ``state``) over ``encoder``'s B sources, N = B K:
        K hypotheses per source in consecutive rows, which share its one encoder output (a beam search's).
        ``prev_ids`` may hold extended ids (copied OOVs): those are read as UNK."""
        return self._step(prev_ids, state, encoder)

    def _step(
        self,
        prev_ids: torch.Tensor,
        state: DecoderState,
        encoder: EncoderOutput,
        scale: float = 1.0,
        add_to: torch.Tensor | None = None,
    ) -> StepOutput:
        """:meth:`decode_step`, its distribution times ``scale`` and added to ``add_to`` if given (an
        ensemble's members summed in place, see :meth:`CopyMixture.forward`)."""
        features, attention, p_gen, new_state = self._recurrent_step(prev_ids, state, encoder)
        logits = self._vocab_logits(features)
        extended_ids = encoder.extended_ids
        if extended_ids.size(0) != prev_ids.size(0):  # K hypotheses per source (see _attention)
            extended_ids = extended_ids.repeat_interleave(prev_ids.size(0) // extended_ids.size(0), dim=0)
        num_oovs = encoder.num_oovs
        probs = self.copy(logits, attention, p_gen, extended_ids, num_oovs, scale=scale, add_to=add_to)
        return StepOutput(probs, attention, state.coverage, p_gen, new_state)

    # ------------------------------------------------------------------ teacher-forced loss
    def forward(
        self,
        input_ids: torch.Tensor,
        decoder_input_ids: torch.Tensor,
        labels: torch.Tensor,
        extended_ids: torch.Tensor | None = None,
        num_oovs: int = 0,
    ) -> ForwardOutput:
        """Teacher-forced loss. ``labels`` (B, T) are extended ids with ``pad_id`` at padding;
        ``decoder_input_ids`` are ``[BOS] + labels[:-1]`` (extended ids are mapped to UNK inside).

        The recurrent part runs step by step; the vocabulary projection and :class:`CopyMixture`'s loss run
        once over all steps. The loss is averaged over each summary's target steps, then over the
        summaries (:meth:`CopyMixture.loss`)."""
        encoder, state = self.encode(input_ids, extended_ids, num_oovs)
        target_mask = labels.ne(self.config.pad_id)
        features, attentions, p_gens, coverage_terms = [], [], [], []
        for t in range(labels.size(1)):
            coverage = state.coverage
            feats, attention, p_gen, state = self._recurrent_step(decoder_input_ids[:, t], state, encoder)
            features.append(feats)
            attentions.append(attention)
            p_gens.append(p_gen)
            coverage_terms.append(torch.minimum(attention, coverage).sum(-1))
        token_nll = self.copy.token_nll(
            self._vocab_logits(torch.stack(features, dim=1)),
            torch.stack(attentions, dim=1),
            torch.stack(p_gens, dim=1),
            encoder.extended_ids,
            labels,
        )
        token_nll = token_nll * target_mask
        loss, nll, coverage_loss, num_summaries = self.copy.loss(
            token_nll, torch.stack(coverage_terms, dim=1), target_mask
        )
        return ForwardOutput(loss, nll, coverage_loss, num_summaries, int(target_mask.sum()), token_nll)

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path, vocab: Any | None = None) -> Path:
        """Write ``model.safetensors``, ``config.json`` and (if given) the vocabulary, each atomically."""
        return _save_pretrained(self, directory, vocab)

    @classmethod
    def from_pretrained(
        cls, directory: str | Path
    ) -> tuple[PointerGenerator | PointerGeneratorEnsemble, Any]:
        """Load ``(model, vocab)`` from a directory written by :meth:`save_pretrained` (or by
        :meth:`PointerGeneratorEnsemble.save_pretrained`: its config says ``ensemble_size`` > 1).

        A missing, corrupt or mismatched file raises :class:`CheckpointError`."""
        from synopsis.config import from_dict
        from synopsis.vocab import Vocab

        directory = Path(directory)
        vocab_path = directory / VOCAB_FILE

        def build(raw: dict[str, Any]) -> PointerGenerator | PointerGeneratorEnsemble:
            config = from_dict(PointerGeneratorConfig, raw, str(directory / CONFIG_FILE))
            if not vocab_path.is_file():
                raise CheckpointError(f"{directory}: missing {VOCAB_FILE}")
            vocab = Vocab.load(vocab_path)
            if len(vocab) != config.vocab_size or vocab.fingerprint != config.vocab_fingerprint:
                raise CheckpointError(
                    f"{vocab_path}: vocabulary ({len(vocab)} tokens, fingerprint {vocab.fingerprint}) does "
                    f"not match the checkpoint ({config.vocab_size} tokens, fingerprint "
                    f"{config.vocab_fingerprint})"
                )
            loaded.append(vocab)
            return PointerGeneratorEnsemble(config) if config.ensemble_size > 1 else cls(config)

        loaded: list[Vocab] = []
        model = load_model(directory, build, CHECKPOINT_TYPE)[0]
        model.eval()
        return model, loaded[0]


class PointerGeneratorEnsemble(nn.Module):
    """``config.ensemble_size`` pointer-generators of one shape and vocabulary, decoded as one model: every
    step's final distribution over the extended vocabulary is the mean of the members' (each with its own
    attention, copy and coverage), as OpenNMT-py's ensemble decoding averages its models' outputs. Not in
    See et al.; the trainer makes one from its coverage runs (``schedule.combine_runs: ensemble``).

    Inference only: :meth:`encode` and :meth:`decode_step` are :class:`PointerGenerator`'s, with one encoder
    output and one decoder state per member; training uses the members themselves."""

    def __init__(self, config: PointerGeneratorConfig) -> None:
        super().__init__()
        if config.ensemble_size < 2:
            raise ValueError(f"an ensemble needs ensemble_size >= 2, got {config.ensemble_size}")
        self.config = config
        member = dataclasses.replace(config, ensemble_size=1)
        self.members = nn.ModuleList(PointerGenerator(member) for _ in range(config.ensemble_size))

    @classmethod
    def of(
        cls, config: PointerGeneratorConfig, weights: Sequence[dict[str, torch.Tensor]]
    ) -> PointerGeneratorEnsemble:
        """The ensemble of models of ``config``'s shape with these state dicts (one per member)."""
        ensemble = cls(dataclasses.replace(config, ensemble_size=len(weights)))
        for member, state in zip(ensemble.members, weights, strict=True):
            member.load_state_dict(state)
        return ensemble

    def encode(
        self, input_ids: torch.Tensor, extended_ids: torch.Tensor | None = None, num_oovs: int = 0
    ) -> tuple[tuple[EncoderOutput, ...], tuple[DecoderState, ...]]:
        outputs = [member.encode(input_ids, extended_ids, num_oovs) for member in self.members]
        return tuple(encoder for encoder, _ in outputs), tuple(state for _, state in outputs)

    def decode_step(
        self,
        prev_ids: torch.Tensor,
        state: tuple[DecoderState, ...],
        encoder: tuple[EncoderOutput, ...],
    ) -> StepOutput:
        """One step of every member; the mean of their distributions (and of their attention, coverage and
        p_gen, for inspection)."""
        # The distributions, a step's largest tensors, are scaled by 1/M in the copy mixture and, decoding,
        # summed member by member into the first one's buffer: no stacked copy, no separate sum and divide.
        scale, grad = 1.0 / len(self.members), torch.is_grad_enabled()
        probs: torch.Tensor | None = None
        steps = []
        for member, member_state, member_encoder in zip(self.members, state, encoder, strict=True):
            step = member._step(prev_ids, member_state, member_encoder, scale, None if grad else probs)
            probs = probs + step.probs if grad and probs is not None else step.probs
            steps.append(step)

        def mean(name: str) -> torch.Tensor:
            return torch.stack([getattr(step, name) for step in steps]).mean(0)

        states = tuple(step.state for step in steps)
        return StepOutput(probs, mean("attention"), mean("coverage"), mean("p_gen"), states)

    def save_pretrained(self, directory: str | Path, vocab: Any | None = None) -> Path:
        """One checkpoint: ``members.K.*`` weights and the shared config with ``ensemble_size``."""
        return _save_pretrained(self, directory, vocab)


def _save_pretrained(model: nn.Module, directory: str | Path, vocab: Any | None) -> Path:
    """``model.safetensors``, ``config.json`` and (if given) the vocabulary of ``model``, as one directory
    written atomically by the checkpoint store."""
    if vocab is not None and vocab.fingerprint != model.config.vocab_fingerprint:
        raise CheckpointError("the vocabulary does not match this model's config (fingerprint)")
    extra = None if vocab is None else (lambda tmp: vocab.save(tmp / VOCAB_FILE))
    return save_model(directory, model, asdict(model.config), CHECKPOINT_TYPE, extra=extra)


#: Weight initialisations for a new model: the authors' code's, or PyTorch's module defaults.
INIT_SCHEMES = ("authors", "pytorch")
_LSTM_INIT_MAGNITUDE = 0.02  # the authors' rand_unif_init_mag
_TRUNC_NORM_STD = 1e-4  # the authors' trunc_norm_init_std


@torch.no_grad()
def init_weights(model: PointerGenerator, scheme: str = "authors") -> PointerGenerator:
    """Initialise a new model's weights in place (a loaded checkpoint does not need this).

    ``"authors"``: as See et al.'s TensorFlow code: LSTM weight matrices uniform in [-0.02, 0.02], their
    biases 0 except the forget gate's 1 (TensorFlow's LSTMCell adds ``forget_bias=1.0``); every other
    weight and bias (embeddings, attention, p_gen, output projections) truncated normal with std 1e-4,
    cut at two standard deviations as TensorFlow's ``truncated_normal_initializer``. The padding row of
    the embeddings stays 0. ``"pytorch"``: the module defaults (embeddings N(0, 1), linear layers and
    LSTMs uniform in +-1/sqrt(fan-in)), what models before this option were trained with."""
    if scheme not in INIT_SCHEMES:
        raise ConfigError(f"init must be one of {', '.join(INIT_SCHEMES)}, got {scheme!r}")
    if scheme == "pytorch":
        return model  # the modules were built with these
    recurrent = {model.encoder, model.decoder}
    for module in model.modules():
        if module in recurrent:
            for name, parameter in module.named_parameters():
                if name.startswith("weight"):
                    parameter.uniform_(-_LSTM_INIT_MAGNITUDE, _LSTM_INIT_MAGNITUDE)
                else:  # gates i, f, g, o: the forget bias once (in bias_ih), as TensorFlow adds it once
                    parameter.zero_()
                    if name.startswith("bias_ih"):
                        hidden = parameter.numel() // 4
                        parameter[hidden : 2 * hidden] = 1.0
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            for parameter in module.parameters(recurse=False):
                nn.init.trunc_normal_(
                    parameter, std=_TRUNC_NORM_STD, a=-2 * _TRUNC_NORM_STD, b=2 * _TRUNC_NORM_STD
                )
    model.embedding.weight[model.config.pad_id] = 0.0
    return model


def config_for_vocab(vocab: Any, **kwargs: Any) -> PointerGeneratorConfig:
    """A config whose special-token ids and size come from ``vocab``."""
    return PointerGeneratorConfig(
        vocab_size=len(vocab),
        pad_id=vocab.pad_id,
        unk_id=vocab.unk_id,
        bos_id=vocab.bos_id,
        eos_id=vocab.eos_id,
        vocab_fingerprint=vocab.fingerprint,
        **kwargs,
    )
