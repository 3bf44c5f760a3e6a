"""The pointer-generator's attention and copy pieces (See, Liu and Manning, ACL 2017): the fused attention
energy of one decoder step (:class:`AttentionEnergy`, eq. 1 and 11) and the final distribution over the
extended vocabulary with its loss (:class:`CopyMixture`, eq. 9, 12 and 13), used by
:class:`~synopsis.models.pointer_generator.PointerGenerator`."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn


class CopyFlags(Protocol):
    """What the copy mixture reads of its model's config (``PointerGeneratorConfig``; this module imports
    nothing of the model's, so the two do not import each other)."""

    pointer: bool

# Probabilities are clamped before the log: a saturated p_gen (0 or 1) times a zero attention weight or a zero
# vocabulary probability must give a large finite loss, never -log(0) = inf and then NaN gradients.
_EPS = 1e-12


class AttentionEnergy(torch.autograd.Function):
    """Attention energies of one decoder step, ``e'_i = v2 . sigmoid(F2_i + q2 + c_i w2)`` (N, L).

    With ``F2 = 2 W_h h_i``, ``q2 = 2 (W_s s_t + b_attn)``, ``w2 = 2 w_c`` and ``v2 = 2 v`` this is
    ``v . tanh(W_h h_i + W_s s_t + w_c c_i + b_attn) + sum(v)`` (See et al. 2017, eq. 1 and 11): the paper's
    energy up to a per-row constant, so the same attention after the softmax.

    The features ``F2`` have one row per source (B, L, 2H); the queries and coverage have K rows per source
    (N = B K, source-major: the K hypotheses of a beam search), which read their source's features by
    broadcasting instead of from K copies. The (B, K, L, 2H) pre-activation is written into ``workspace`` (one
    buffer per source batch, reused by every step) and recomputed in the backward pass: autograd would
    otherwise keep one such tensor per target step.
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
        activation = pre_activation(features2, query2, coverage, coverage_weight2, workspace).sigmoid_()
        ctx.save_for_backward(features2, query2, coverage, coverage_weight2, v2)
        ctx.workspace = workspace
        return (activation @ v2).view(query2.size(0), -1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        features2, query2, coverage, coverage_weight2, v2 = ctx.saved_tensors
        need_f, need_q, need_c, need_w, need_v, _ = ctx.needs_input_grad
        s = pre_activation(features2, query2, coverage, coverage_weight2, ctx.workspace).sigmoid_()
        batch, k, length, _ = s.shape
        grad = grad.view(batch, k, length)
        grad_v = torch.einsum("bkl,bkld->d", grad, s) if need_v else None
        # d e' / d z = v2 * s (1 - s), times the incoming gradient; the last multiply allocates the result
        # (autograd accumulates it into the gradient of F2, so it cannot live in the reused buffer).
        s.addcmul_(s, s, value=-1.0).mul_(grad.unsqueeze(-1))
        grad_z = s * v2
        grad_f = (grad_z[:, 0] if k == 1 else grad_z.sum(1)) if need_f else None
        grad_q = grad_z.sum(2).view_as(query2) if need_q else None
        has_coverage = coverage is not None
        grad_c = (grad_z @ coverage_weight2).view_as(coverage) if need_c and has_coverage else None
        grad_w = (
            torch.einsum("bkld,bkl->d", grad_z, coverage.view(batch, k, length))
            if need_w and has_coverage
            else None
        )
        return grad_f, grad_q, grad_c, grad_w, grad_v, None


def pre_activation(
    features2: torch.Tensor,
    query2: torch.Tensor,
    coverage: torch.Tensor | None,
    coverage_weight2: torch.Tensor,
    out: torch.Tensor,
) -> torch.Tensor:
    """``F2 + q2 + c w2`` into ``out`` (B, K, L, 2H), for features (B, L, 2H) and K query rows per source."""
    batch, k, length, dim = out.shape
    torch.add(features2.unsqueeze(1), query2.view(batch, k, 1, dim), out=out)
    if coverage is not None:
        # w_c c_i is an outer product: one fused multiply-add, not a Linear with one input feature.
        out.addcmul_(coverage.view(batch, k, length, 1), coverage_weight2)
    return out


class CopyMixture(nn.Module):
    """The pointer's final distribution and its loss (See et al. 2017, eq. 9, 12 and 13), one module for the
    teacher-forced loss and for decoding, as OpenNMT-py's ``CopyGenerator`` / ``CopyGeneratorLoss``.

    ``P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i`` over the extended vocabulary (this
    article's OOVs after the fixed vocabulary); with the pointer off, ``P = P_vocab``. It has no parameters
    (p_gen's linear layer stays on the model, so checkpoints keep their names) and reads the flags from the
    model's config, which the trainer changes between phases.
    """

    def __init__(self, config: CopyFlags) -> None:
        super().__init__()
        self.config = config

    def forward(
        self,
        vocab_logits: torch.Tensor,
        attention: torch.Tensor,
        p_gen: torch.Tensor,
        extended_ids: torch.Tensor,
        num_oovs: int,
        *,
        scale: float = 1.0,
        add_to: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(N, V + num_oovs) probabilities for N rows (one decoder step); (N, V) with the pointer off.

        ``scale`` multiplies the distribution, and ``add_to`` (of its shape, without autograd) receives it
        added in place and is returned: an ensemble's mean, summed member by member (see
        :class:`~synopsis.models.pointer_generator.PointerGeneratorEnsemble`)."""
        vocab_probs = torch.softmax(vocab_logits, dim=-1)
        if not self.config.pointer:
            if add_to is not None:
                return add_to.add_(vocab_probs, alpha=scale)
            return vocab_probs if scale == 1.0 else vocab_probs * scale
        gen = p_gen.unsqueeze(-1)
        copied = (1.0 - p_gen).unsqueeze(-1) * attention
        if scale != 1.0:
            gen, copied = gen * scale, copied * scale
        rows, vocab = vocab_probs.shape
        if add_to is not None:
            probs = add_to
            probs[:, :vocab].addcmul_(gen, vocab_probs)
        elif torch.is_grad_enabled():  # out of place, for autograd
            probs = gen * vocab_probs
            probs = nn.functional.pad(probs, (0, num_oovs)) if num_oovs else probs
        else:
            # Decoding: one (N, V + num_oovs) buffer written once (the product into its head, zeros in its
            # tail): the vocabulary-wide rows are a step's largest tensors, and each pass over them counts.
            probs = vocab_probs.new_empty(rows, vocab + num_oovs)
            torch.mul(gen, vocab_probs, out=probs[:, :vocab])
            probs[:, vocab:].zero_()
        # scatter_add (not scatter): a word that occurs k times in the article gets all k weights.
        return probs.scatter_add_(1, extended_ids, copied)

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
