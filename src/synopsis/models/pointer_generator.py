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
* loss: mean over target steps of ``-log P(w*_t) + lambda sum_i min(a_i^t, c_i^t)``.

``pointer=False`` gives the plain attention seq2seq baseline (P = P_vocab over the fixed vocabulary),
``coverage=False`` drops the coverage feature and loss, so the paper's three systems are one flag apart.

Decoding lives in :mod:`synopsis.generation`; this module exposes the step function it needs:
:meth:`PointerGenerator.encode` once, then :meth:`PointerGenerator.decode_step` per token.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from synopsis.errors import CheckpointError, ConfigError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"

# Probabilities are clamped before the log: a saturated p_gen (0 or 1) times a zero attention weight or a zero
# vocabulary probability must give a large finite loss, never -log(0) = inf and then NaN gradients.
_EPS = 1e-12


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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_dim", "hidden_dim"):
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
    features: torch.Tensor  # (B, L, 2H) W_h h_i, precomputed once
    mask: torch.Tensor  # (B, L) True at real tokens
    extended_ids: torch.Tensor  # (B, L) source ids in the extended vocabulary (for copying)
    num_oovs: int  # size of the largest OOV list in the batch


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
    state: DecoderState


@dataclass
class ForwardOutput:
    loss: torch.Tensor  # scalar: nll + coverage_loss_weight * coverage_loss (when coverage is on)
    nll: torch.Tensor  # scalar: mean over real target tokens
    coverage_loss: torch.Tensor  # scalar: mean over real target tokens of sum_i min(a_i, c_i)
    num_tokens: int
    token_nll: torch.Tensor  # (B, T) per-token -log P(w*), zeros at padding


class PointerGenerator(nn.Module):
    def __init__(self, config: PointerGeneratorConfig) -> None:
        super().__init__()
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

    # ------------------------------------------------------------------ encoder
    def encode(
        self, input_ids: torch.Tensor, extended_ids: torch.Tensor | None = None, num_oovs: int = 0
    ) -> tuple[EncoderOutput, DecoderState]:
        """Run the encoder. ``input_ids`` (B, L) use UNK for OOVs; padding is ``config.pad_id``."""
        cfg = self.config
        mask = input_ids.ne(cfg.pad_id)
        embedded = self.dropout(self.embedding(input_ids))
        forward_states, h_fw, c_fw = self._encoder_direction(embedded, mask, reverse=False)
        backward_states, h_bw, c_bw = self._encoder_direction(embedded, mask, reverse=True)
        states = torch.cat([forward_states, backward_states], dim=-1)
        # Final states of both directions -> (B, 2H) -> reduced to the decoder's H.
        h0 = F.relu(self.reduce_h(torch.cat([h_fw, h_bw], dim=-1)))
        c0 = F.relu(self.reduce_c(torch.cat([c_fw, c_bw], dim=-1)))
        encoder_output = EncoderOutput(
            states=states,
            features=self.attn_encoder(states),
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

    def _encoder_direction(
        self, embedded: torch.Tensor, mask: torch.Tensor, reverse: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One direction of the bidirectional encoder over a padded batch, exactly as a packed sequence:
        padding never changes the state and gets zero outputs. Returns (outputs (B, L, H), h_n, c_n).

        Written out (with ``self.encoder``'s own weights) because the packed ``nn.LSTM`` backward on CPU
        zero-fills a copy of the whole packed input at every time step: quadratic in the length, it was
        ~75% of a training step at 400 source tokens. Input projections are one matmul; ``unbind``/``stack``
        keep the per-step backward linear."""
        suffix = "_reverse" if reverse else ""
        lstm = self.encoder
        w_ih, w_hh = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
        bias = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
        steps = F.linear(embedded, w_ih, bias).unbind(1)
        keep = mask.unsqueeze(-1).unbind(1)
        h = embedded.new_zeros(embedded.size(0), w_hh.size(1))
        c = h
        outputs: list[torch.Tensor] = [h] * len(steps)
        for t in reversed(range(len(steps))) if reverse else range(len(steps)):
            i, f, g, o = (steps[t] + F.linear(h, w_hh)).chunk(4, dim=-1)  # PyTorch's gate order
            c_t = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_t = torch.sigmoid(o) * torch.tanh(c_t)
            c, h = torch.where(keep[t], c_t, c), torch.where(keep[t], h_t, h)
            outputs[t] = h_t * keep[t]
        return torch.stack(outputs, dim=1), h, c

    # ------------------------------------------------------------------ one decoder step
    def _attention(
        self, s_t: torch.Tensor, encoder: EncoderOutput, coverage: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # The (B, L, 2H) pre-activation dominates the cost of a step: write it once and update it in place
        # (w_c c_i is an outer product, so addcmul_ rather than a Linear with one input feature).
        # Both in-place ops are autograd-safe: the sum is not needed for backward, tanh saves its output.
        hidden = encoder.features + self.attn_decoder(s_t).unsqueeze(1)
        if self.config.coverage:
            hidden.addcmul_(coverage.unsqueeze(-1), self.attn_coverage.weight.squeeze(-1))
        scores = self.attn_v(hidden.tanh_()).squeeze(-1)
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
        vocab_probs = torch.softmax(self._vocab_logits(features), dim=-1)
        if self.config.pointer:
            probs = p_gen.unsqueeze(-1) * vocab_probs
            if encoder.num_oovs:
                probs = torch.cat([probs, probs.new_zeros(probs.size(0), encoder.num_oovs)], dim=-1)
            # scatter_add (not scatter): a word that occurs k times in the article gets all k weights.
            probs = probs.scatter_add(1, encoder.extended_ids, (1.0 - p_gen).unsqueeze(-1) * attention)
        else:
            probs = vocab_probs
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

        Only the gold word's probability is needed, so instead of materialising the (B, T, V + OOV)
        final distribution this computes ``p_gen P_vocab(w*) + (1 - p_gen) sum_{i: w_i = w*} a_i``
        directly, with the vocabulary projection batched over all steps (equal to :meth:`decode_step`'s
        distribution; tested).
        The loss is averaged over real target tokens; an all-padding batch gives 0, not 0/0."""
        cfg = self.config
        encoder, state = self.encode(input_ids, extended_ids, num_oovs)
        if not cfg.pointer:
            # Without copying, an OOV target can only be predicted as UNK.
            labels = labels.masked_fill(labels >= cfg.vocab_size, cfg.unk_id)
        target_mask = labels.ne(cfg.pad_id)
        features, attentions, p_gens, coverage_terms = [], [], [], []
        for t in range(labels.size(1)):
            coverage = state.coverage
            feats, attention, p_gen, state = self._recurrent_step(decoder_input_ids[:, t], state, encoder)
            features.append(feats)
            attentions.append(attention)
            p_gens.append(p_gen)
            coverage_terms.append(torch.minimum(attention, coverage).sum(-1))
        log_vocab = torch.log_softmax(self._vocab_logits(torch.stack(features, dim=1)), dim=-1)  # (B, T, V)
        gold_log_vocab = log_vocab.gather(2, labels.clamp(max=cfg.vocab_size - 1).unsqueeze(-1)).squeeze(-1)
        if cfg.pointer:
            # An extended (copied OOV) id has no generation probability, only the copy term.
            gold_vocab = gold_log_vocab.exp() * labels.lt(cfg.vocab_size)
            p_gen = torch.stack(p_gens, dim=1)  # (B, T)
            attention = torch.stack(attentions, dim=1)  # (B, T, L)
            copy = (attention * encoder.extended_ids.unsqueeze(1).eq(labels.unsqueeze(-1))).sum(-1)
            token_nll = -torch.log((p_gen * gold_vocab + (1.0 - p_gen) * copy).clamp(min=_EPS))
        else:
            token_nll = -gold_log_vocab  # log domain: exact even for tiny probabilities
        token_nll = token_nll * target_mask
        token_cov = torch.stack(coverage_terms, dim=1) * target_mask
        num_tokens = int(target_mask.sum())
        denominator = max(num_tokens, 1)
        nll = token_nll.sum() / denominator
        coverage_loss = token_cov.sum() / denominator
        loss = nll + cfg.coverage_loss_weight * coverage_loss if cfg.coverage else nll
        return ForwardOutput(loss, nll, coverage_loss, num_tokens, token_nll)

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path, vocab: Any | None = None) -> Path:
        """Write ``model.safetensors``, ``config.json`` and (if given) the vocabulary, each atomically."""
        from safetensors.torch import save_file

        from synopsis.io import write_json

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if vocab is not None:
            if vocab.fingerprint != self.config.vocab_fingerprint:
                raise CheckpointError("the vocabulary does not match this model's config (fingerprint)")
            vocab.save(directory / VOCAB_FILE)
        state = {k: v.detach().contiguous().clone() for k, v in self.state_dict().items()}
        tmp = directory / f".{WEIGHTS_FILE}.tmp"
        save_file(state, str(tmp), metadata={"format": "pt"})
        tmp.replace(directory / WEIGHTS_FILE)
        write_json(directory / CONFIG_FILE, asdict(self.config))
        return directory

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> tuple[PointerGenerator, Any]:
        """Load ``(model, vocab)`` from a directory written by :meth:`save_pretrained`.

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
        model = cls(config)
        state = load_tensors(directory / WEIGHTS_FILE)
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise CheckpointError(
                f"{directory / WEIGHTS_FILE}: weights do not match config.json ({err})"
            ) from None
        model.eval()
        return model, vocab


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
