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
the model come from one place too (:func:`document_words`, :func:`encode_batch`).

Decoding lives in :mod:`synopsis.generation`; this module exposes the step function it needs:
:meth:`PointerGenerator.encode` once, then :meth:`PointerGenerator.decode_step` per token.
:class:`PointerGeneratorEnsemble` (``config.ensemble_size > 1``, not in the paper) decodes several models of
one vocabulary as one, through the same two methods: each step's final distribution is the mean of theirs.

Where the time goes on CPU, and what is done about it (the functions are unchanged):

* the encoder is PyTorch's fused LSTM (``torch.lstm``, the kernel behind ``nn.LSTM``; cuDNN on GPUs) on
  right-aligned rows, with padding made an exact no-op (see :meth:`PointerGenerator._bidirectional`), instead
  of a packed sequence, whose CPU backward is quadratic in the length;
* ``W_h h_i`` is computed once per source; the rest of the attention energy is per step and is one custom
  autograd function (:class:`_AttentionEnergy`) that writes the (B, L, 2H) pre-activation into one reused
  buffer and recomputes it in the backward pass instead of keeping one such tensor per target step;
* ``tanh(x) = 2 sigmoid(2x) - 1``: PyTorch's CPU ``tanh`` is ~3x slower than its ``sigmoid``, and the constant
  ``-1`` only shifts every energy of a row by ``sum(v)``, which the softmax ignores.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from synopsis.errors import CheckpointError, ConfigError
from synopsis.text import word_tokenize

if TYPE_CHECKING:
    from synopsis.document import Document
    from synopsis.vocab import Vocab

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"

# Probabilities are clamped before the log: a saturated p_gen (0 or 1) times a zero attention weight or a zero
# vocabulary probability must give a large finite loss, never -log(0) = inf and then NaN gradients.
_EPS = 1e-12
# Input-gate pre-activation added at padding steps of the encoder: sigmoid(-1e4) is exactly 0 in fp32 and
# fp16, so from a zero state a padding step gives c = f * 0 + 0 * g = 0 and h = o * tanh(0) = 0 exactly.
# Finite (not -inf) so that the 0 * weight products at real tokens stay 0 instead of NaN.
_CLOSED_GATE = -1e4


@dataclass
class SourceProfile:
    """What held-out inputs of the training corpus look like, so that a summarizer can say when a document
    is far from them. Written by the trainer from the validation split (which the vocabulary never saw)."""

    corpus: str
    documents: int
    words_median: int
    words_p99: int
    known_word_rate_min: float  # share of a document's alphabetic words in the vocabulary, lowest document
    known_word_rate_median: float


def known_word_rate(words: Sequence[str], vocab: Vocab) -> float:
    """Share of the alphabetic words (numbers and punctuation aside) in the vocabulary; 1.0 if none."""
    alphabetic = [w for w in words if any(c.isalpha() for c in w)]
    if not alphabetic:
        return 1.0
    return sum(w in vocab for w in alphabetic) / len(alphabetic)


def source_profile(corpus: str, sources: Sequence[Sequence[str]], vocab: Vocab) -> SourceProfile:
    """The :class:`SourceProfile` of these tokenised documents (see :func:`document_words`)."""
    if not sources:
        raise ValueError("source_profile needs at least one document")
    lengths = sorted(len(words) for words in sources)
    rates = sorted(known_word_rate(words, vocab) for words in sources)
    return SourceProfile(
        corpus=corpus,
        documents=len(sources),
        words_median=lengths[len(lengths) // 2],
        words_p99=lengths[min(len(lengths) - 1, round(0.99 * (len(lengths) - 1)))],
        known_word_rate_min=round(rates[0], 4),
        known_word_rate_median=round(rates[len(rates) // 2], 4),
    )


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
    """What every decoder step reads; all tensors have the batch first (so beams can be expanded)."""

    states: torch.Tensor  # (B, L, 2H) h_i
    features: torch.Tensor  # (B, L, 2H) 2 W_h h_i, precomputed once (doubled: see the module docstring)
    mask: torch.Tensor  # (B, L) True at real tokens
    extended_ids: torch.Tensor  # (B, L) source ids in the extended vocabulary (for copying)
    num_oovs: int  # size of the largest OOV list in the batch
    # Scratch space for the attention pre-activation, reused by every step on this source (never an input:
    # not copied when decoders expand or reorder the rows, it is re-made at the new size).
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


class _AttentionEnergy(torch.autograd.Function):
    """Attention energies of one decoder step, ``e'_i = v2 . sigmoid(F2_i + q2 + c_i w2)`` (B, L).

    With ``F2 = 2 W_h h_i``, ``q2 = 2 (W_s s_t + b_attn)``, ``w2 = 2 w_c`` and ``v2 = 2 v`` this is
    ``v . tanh(W_h h_i + W_s s_t + w_c c_i + b_attn) + sum(v)`` (See et al. 2017, eq. 1 and 11): the paper's
    energy up to a per-row constant, so the same attention after the softmax.

    The (B, L, 2H) pre-activation is written into ``workspace`` (one buffer per source, reused by every step)
    and recomputed in the backward pass: autograd would otherwise keep one such tensor per target step.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        features2: torch.Tensor,
        query2: torch.Tensor,
        coverage: torch.Tensor | None,
        coverage_weight2: torch.Tensor,
        v2: torch.Tensor,
        workspace: torch.Tensor,
    ) -> torch.Tensor:
        activation = _pre_activation(features2, query2, coverage, coverage_weight2, workspace).sigmoid_()
        ctx.save_for_backward(features2, query2, coverage, coverage_weight2, v2)
        ctx.workspace = workspace
        return activation @ v2

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        features2, query2, coverage, coverage_weight2, v2 = ctx.saved_tensors
        need_f, need_q, need_c, need_w, need_v, _ = ctx.needs_input_grad
        s = _pre_activation(features2, query2, coverage, coverage_weight2, ctx.workspace).sigmoid_()
        grad_v = torch.einsum("bl,blk->k", grad, s) if need_v else None
        # d e' / d z = v2 * s (1 - s), times the incoming gradient; the last multiply allocates the result
        # (autograd accumulates it into the gradient of F2, so it cannot live in the reused buffer).
        s.addcmul_(s, s, value=-1.0).mul_(grad.unsqueeze(-1))
        grad_z = s * v2
        grad_q = grad_z.sum(1) if need_q else None
        grad_c = grad_z @ coverage_weight2 if need_c and coverage is not None else None
        grad_w = torch.einsum("blk,bl->k", grad_z, coverage) if need_w and coverage is not None else None
        return grad_z if need_f else None, grad_q, grad_c, grad_w, grad_v, None


def _pre_activation(
    features2: torch.Tensor,
    query2: torch.Tensor,
    coverage: torch.Tensor | None,
    coverage_weight2: torch.Tensor,
    out: torch.Tensor,
) -> torch.Tensor:
    torch.add(features2, query2.unsqueeze(1), out=out)
    if coverage is not None:
        # w_c c_i is an outer product: one fused multiply-add, not a Linear with one input feature.
        out.addcmul_(coverage.unsqueeze(-1), coverage_weight2)
    return out


class CopyMixture(nn.Module):
    """The pointer's final distribution and its loss (See et al. 2017, eq. 9, 12 and 13), one module for the
    teacher-forced loss and for decoding, as OpenNMT-py's ``CopyGenerator`` / ``CopyGeneratorLoss``.

    ``P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i`` over the extended vocabulary (this
    article's OOVs after the fixed vocabulary); with the pointer off, ``P = P_vocab``. It has no parameters
    (p_gen's linear layer stays on the model, so checkpoints keep their names) and reads the flags from the
    model's config, which the trainer changes between phases.
    """

    def __init__(self, config: PointerGeneratorConfig) -> None:
        super().__init__()
        self.config = config

    def forward(
        self,
        vocab_logits: torch.Tensor,
        attention: torch.Tensor,
        p_gen: torch.Tensor,
        extended_ids: torch.Tensor,
        num_oovs: int,
    ) -> torch.Tensor:
        """(N, V + num_oovs) probabilities for N rows (one decoder step); (N, V) with the pointer off."""
        vocab_probs = torch.softmax(vocab_logits, dim=-1)
        if not self.config.pointer:
            return vocab_probs
        probs = p_gen.unsqueeze(-1) * vocab_probs
        if num_oovs:
            probs = torch.cat([probs, probs.new_zeros(probs.size(0), num_oovs)], dim=-1)
        # scatter_add (not scatter): a word that occurs k times in the article gets all k weights.
        return probs.scatter_add(1, extended_ids, (1.0 - p_gen).unsqueeze(-1) * attention)

    def token_nll(
        self,
        vocab_logits: torch.Tensor,
        attention: torch.Tensor,
        p_gen: torch.Tensor,
        extended_ids: torch.Tensor,
        labels: torch.Tensor,
    ) -> torch.Tensor:
        """``-log P(w*_t)`` (B, T) of the gold extended ids ``labels`` (B, T), with the vocabulary logits
        (B, T, V), attention (B, T, L) and p_gen (B, T) of all steps.

        Only the gold word's probability is needed, so the (B, T, V + OOV) distribution is never built;
        the result equals ``-log`` of :meth:`forward`'s probability of the gold word (tested)."""
        cfg = self.config
        log_vocab = torch.log_softmax(vocab_logits, dim=-1)
        if not cfg.pointer:
            # Without copying, an OOV target can only be predicted as UNK; log domain: exact for tiny P.
            labels = labels.masked_fill(labels >= cfg.vocab_size, cfg.unk_id)
            return -log_vocab.gather(2, labels.unsqueeze(-1)).squeeze(-1)
        gold_log_vocab = log_vocab.gather(2, labels.clamp(max=cfg.vocab_size - 1).unsqueeze(-1)).squeeze(-1)
        # An extended (copied OOV) id has no generation probability, only the copy term.
        gold_vocab = gold_log_vocab.exp() * labels.lt(cfg.vocab_size)
        copy = (attention * extended_ids.unsqueeze(1).eq(labels.unsqueeze(-1))).sum(-1)
        return -torch.log((p_gen * gold_vocab + (1.0 - p_gen) * copy).clamp(min=_EPS))

    def loss(
        self, token_nll: torch.Tensor, token_coverage: torch.Tensor, target_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(loss, nll, coverage loss, number of summaries), as See et al. (eq. 6 and 13) and their code: each
        summary's mean over its own target steps, then the mean over the summaries of the batch, so a long
        summary weighs as much as a short one; the coverage term ``sum_i min(a_i^t, c_i^t)`` is averaged
        the same way and weighted by lambda when coverage is on. Rows without targets are left out; an
        all-padding batch gives 0, not 0/0."""
        lengths = target_mask.sum(-1)  # (B,)
        summaries = lengths.gt(0)
        num_summaries = int(summaries.sum())
        denominator = max(num_summaries, 1)
        per_step = lengths.clamp(min=1)
        nll = ((token_nll * target_mask).sum(-1) / per_step).sum() / denominator
        coverage_loss = ((token_coverage * target_mask).sum(-1) / per_step).sum() / denominator
        cfg = self.config
        loss = nll + cfg.coverage_loss_weight * coverage_loss if cfg.coverage else nll
        return loss, nll, coverage_loss, num_summaries


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
        # torch.lstm is nn.LSTM's kernel (oneDNN on CPU, cuDNN on GPUs) with explicit weights: one layer, one
        # direction, batch first.
        outputs, h_n, c_n = torch.lstm(
            torch.cat([inputs, closed], dim=-1),
            (zeros, zeros),
            weights,
            True,  # has_biases
            1,  # num_layers
            0.0,  # dropout
            self.training,
            False,  # bidirectional
            True,  # batch_first
        )
        return outputs, h_n[0], c_n[0]

    # ------------------------------------------------------------------ one decoder step
    def _attention(
        self, s_t: torch.Tensor, encoder: EncoderOutput, coverage: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        features = encoder.features
        if encoder.workspace is None or encoder.workspace.shape != features.shape:
            encoder.workspace = torch.empty_like(features, memory_format=torch.contiguous_format)
        # One dtype for the custom function, whose backward runs outside autocast: the features' (bf16 under
        # autocast, as the workspace). A no-op in fp32; coverage itself stays accumulated in fp32.
        dtype = features.dtype
        scores = _AttentionEnergy.apply(
            features,
            2.0 * self.attn_decoder(s_t).to(dtype),
            coverage.to(dtype) if self.config.coverage else None,
            2.0 * self.attn_coverage.weight.squeeze(-1).to(dtype),
            2.0 * self.attn_v.weight.squeeze(0).to(dtype),
            encoder.workspace,
        )
        # Masked softmax with a finite fill (exp underflows to exactly 0) and a final multiply by the mask:
        # an all-pad row (empty article) gets all-zero attention instead of the NaN of softmax(-inf, ...).
        scores = scores.masked_fill(~encoder.mask, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1) * encoder.mask
        context = torch.bmm(attention.unsqueeze(1), encoder.states).squeeze(1)
        return attention, context

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
        """One decoder step. ``prev_ids`` (B,) may hold extended ids (copied OOVs): those are read as UNK."""
        features, attention, p_gen, new_state = self._recurrent_step(prev_ids, state, encoder)
        logits = self._vocab_logits(features)
        probs = self.copy(logits, attention, p_gen, encoder.extended_ids, encoder.num_oovs)
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
        from synopsis.checkpoint import load_tensors
        from synopsis.config import from_dict
        from synopsis.vocab import Vocab

        directory = Path(directory)
        if not directory.is_dir():
            raise CheckpointError(f"{directory}: no such model directory")
        config_path = directory / CONFIG_FILE
        try:
            raw = json.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CheckpointError(
                f"{directory}: missing {CONFIG_FILE}; not a pointer-generator model"
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{config_path}: corrupt JSON ({err})") from None
        try:
            config = from_dict(PointerGeneratorConfig, raw, str(config_path))
        except ConfigError as err:
            raise CheckpointError(str(err)) from None
        vocab_path = directory / VOCAB_FILE
        if not vocab_path.is_file():
            raise CheckpointError(f"{directory}: missing {VOCAB_FILE}")
        vocab = Vocab.load(vocab_path)
        if len(vocab) != config.vocab_size or vocab.fingerprint != config.vocab_fingerprint:
            raise CheckpointError(
                f"{vocab_path}: vocabulary ({len(vocab)} tokens, fingerprint {vocab.fingerprint}) does not "
                f"match the checkpoint ({config.vocab_size} tokens, fingerprint {config.vocab_fingerprint})"
            )
        model = PointerGeneratorEnsemble(config) if config.ensemble_size > 1 else cls(config)
        state = load_tensors(directory / WEIGHTS_FILE)
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise CheckpointError(
                f"{directory / WEIGHTS_FILE}: weights do not match config.json ({err})"
            ) from None
        model.eval()
        return model, vocab


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
        steps = [m.decode_step(prev_ids, s, e) for m, s, e in zip(self.members, state, encoder, strict=True)]

        def mean(name: str) -> torch.Tensor:
            return torch.stack([getattr(step, name) for step in steps]).mean(0)

        states = tuple(step.state for step in steps)
        return StepOutput(mean("probs"), mean("attention"), mean("coverage"), mean("p_gen"), states)

    def save_pretrained(self, directory: str | Path, vocab: Any | None = None) -> Path:
        """One checkpoint: ``members.K.*`` weights and the shared config with ``ensemble_size``."""
        return _save_pretrained(self, directory, vocab)


def _save_pretrained(model: nn.Module, directory: str | Path, vocab: Any | None) -> Path:
    """``model.safetensors``, ``config.json`` and (if given) the vocabulary of ``model``, each atomically."""
    from safetensors.torch import save_file

    from synopsis.io import write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if vocab is not None:
        if vocab.fingerprint != model.config.vocab_fingerprint:
            raise CheckpointError("the vocabulary does not match this model's config (fingerprint)")
        vocab.save(directory / VOCAB_FILE)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    tmp = directory / f".{WEIGHTS_FILE}.tmp"
    save_file(state, str(tmp), metadata={"format": "pt"})
    tmp.replace(directory / WEIGHTS_FILE)
    write_json(directory / CONFIG_FILE, asdict(model.config))
    return directory


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


# ---------------------------------------------------------------------- preprocessing (training, inference)
def document_words(document: Document | str) -> list[str]:
    """The lowercased word tokens the model reads for an article (See et al. lowercase everything).

    The one tokenisation of both training and summarization: a :class:`~synopsis.document.Document` is read
    as its sentences joined by spaces, a string as it is."""
    text = document if isinstance(document, str) else " ".join(s.text for s in document.sentences)
    return word_tokenize(text, lower=True)


def summary_words(reference: str) -> list[str]:
    """The lowercased word tokens of a reference summary (the training target), tokenised as articles are."""
    return word_tokenize(reference, lower=True)


@dataclass
class Batch:
    """Model inputs for a batch of articles (and, for training, their summaries)."""

    input_ids: torch.Tensor  # (B, L) OOV -> UNK
    extended_ids: torch.Tensor  # (B, L)
    decoder_input_ids: torch.Tensor | None  # (B, T) [BOS] + target, or None without targets
    labels: torch.Tensor | None  # (B, T) extended ids + [EOS], pad at padding, or None without targets
    num_oovs: int
    oovs: list[list[str]]


def encode_batch(
    vocab: Vocab,
    sources: Sequence[Sequence[str]],
    targets: Sequence[Sequence[str]] | None = None,
    max_source: int | None = None,
    max_target: int | None = None,
    device: torch.device | str | None = None,
) -> Batch:
    """Ids for a batch of word-tokenised articles (and summaries): the extended vocabulary of each article,
    padding at the end. Articles are cut to ``max_source`` words; ``[BOS] + target`` and ``target + [EOS]``
    are cut to ``max_target``, so a truncated target gets no EOS (as in the authors' code)."""
    encoded = [vocab.encode_source(list(s)[:max_source]) for s in sources]

    def pad(rows: list[list[int]]) -> torch.Tensor:
        width = max(1, max(len(r) for r in rows))
        return torch.tensor(
            [r + [vocab.pad_id] * (width - len(r)) for r in rows], dtype=torch.long, device=device
        )

    decoder_input_ids = labels = None
    if targets is not None:
        decoder_inputs, label_rows = [], []
        for target, src in zip(targets, encoded, strict=True):
            ids = vocab.encode_target(target, src.oovs)
            decoder_inputs.append(([vocab.bos_id] + ids)[:max_target])
            label_rows.append((ids + [vocab.eos_id])[:max_target])
        decoder_input_ids, labels = pad(decoder_inputs), pad(label_rows)
    return Batch(
        input_ids=pad([s.ids for s in encoded]),
        extended_ids=pad([s.extended_ids for s in encoded]),
        decoder_input_ids=decoder_input_ids,
        labels=labels,
        num_oovs=max(len(s.oovs) for s in encoded),
        oovs=[s.oovs for s in encoded],
    )
