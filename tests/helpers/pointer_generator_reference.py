"""The pointer-generator as it was computed before the speed work (commit cc9acc1), kept to test the fast
path against: a Python-stepped LSTM encoder, the attention energy ``v . tanh(W_h h_i + W_s s_t + w_c c_i +
b)`` written out per step, and the final distribution / loss inline. Same parameters (it subclasses the
model), so both load the same weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from synopsis.models.copy_attention import _EPS
from synopsis.models.pointer_generator import (
    DecoderState,
    EncoderOutput,
    ForwardOutput,
    PointerGenerator,
    StepOutput,
)


class ReferencePointerGenerator(PointerGenerator):
    def encode(self, input_ids, extended_ids=None, num_oovs=0):
        cfg = self.config
        mask = input_ids.ne(cfg.pad_id)
        embedded = self.dropout(self.embedding(input_ids))
        forward_states, h_fw, c_fw = self.reference_direction(embedded, mask, reverse=False)
        backward_states, h_bw, c_bw = self.reference_direction(embedded, mask, reverse=True)
        states = torch.cat([forward_states, backward_states], dim=-1)
        h0 = F.relu(self.reduce_h(torch.cat([h_fw, h_bw], dim=-1)))
        c0 = F.relu(self.reduce_c(torch.cat([c_fw, c_bw], dim=-1)))
        encoder_output = EncoderOutput(
            states=states,
            features=self.attn_encoder(states),  # not doubled here: this class's _attention uses tanh
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

    def reference_direction(self, embedded, mask, reverse):
        suffix = "_reverse" if reverse else ""
        lstm = self.encoder
        w_ih, w_hh = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
        bias = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
        steps = F.linear(embedded, w_ih, bias).unbind(1)
        keep = mask.unsqueeze(-1).unbind(1)
        h = embedded.new_zeros(embedded.size(0), w_hh.size(1))
        c = h
        outputs = [h] * len(steps)
        for t in reversed(range(len(steps))) if reverse else range(len(steps)):
            i, f, g, o = (steps[t] + F.linear(h, w_hh)).chunk(4, dim=-1)
            c_t = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_t = torch.sigmoid(o) * torch.tanh(c_t)
            c, h = torch.where(keep[t], c_t, c), torch.where(keep[t], h_t, h)
            outputs[t] = h_t * keep[t]
        return torch.stack(outputs, dim=1), h, c

    def _attention(self, s_t, encoder, coverage):
        hidden = encoder.features + self.attn_decoder(s_t).unsqueeze(1)
        if self.config.coverage:
            hidden = hidden + coverage.unsqueeze(-1) * self.attn_coverage.weight.squeeze(-1)
        scores = self.attn_v(torch.tanh(hidden)).squeeze(-1)
        scores = scores.masked_fill(~encoder.mask, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1) * encoder.mask
        context = torch.bmm(attention.unsqueeze(1), encoder.states).squeeze(1)
        return attention, context

    def decode_step(self, prev_ids, state, encoder):
        features, attention, p_gen, new_state = self._recurrent_step(prev_ids, state, encoder)
        vocab_probs = torch.softmax(self._vocab_logits(features), dim=-1)
        if self.config.pointer:
            probs = p_gen.unsqueeze(-1) * vocab_probs
            if encoder.num_oovs:
                probs = torch.cat([probs, probs.new_zeros(probs.size(0), encoder.num_oovs)], dim=-1)
            probs = probs.scatter_add(1, encoder.extended_ids, (1.0 - p_gen).unsqueeze(-1) * attention)
        else:
            probs = vocab_probs
        return StepOutput(probs, attention, state.coverage, p_gen, new_state)

    def forward(self, input_ids, decoder_input_ids, labels, extended_ids=None, num_oovs=0):
        cfg = self.config
        encoder, state = self.encode(input_ids, extended_ids, num_oovs)
        if not cfg.pointer:
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
        log_vocab = torch.log_softmax(self._vocab_logits(torch.stack(features, dim=1)), dim=-1)
        gold_log_vocab = log_vocab.gather(2, labels.clamp(max=cfg.vocab_size - 1).unsqueeze(-1)).squeeze(-1)
        if cfg.pointer:
            gold_vocab = gold_log_vocab.exp() * labels.lt(cfg.vocab_size)
            p_gen = torch.stack(p_gens, dim=1)
            attention = torch.stack(attentions, dim=1)
            copy = (attention * encoder.extended_ids.unsqueeze(1).eq(labels.unsqueeze(-1))).sum(-1)
            token_nll = -torch.log((p_gen * gold_vocab + (1.0 - p_gen) * copy).clamp(min=_EPS))
        else:
            token_nll = -gold_log_vocab
        token_nll = token_nll * target_mask
        token_cov = torch.stack(coverage_terms, dim=1) * target_mask
        # See et al. (and their code's _mask_and_avg): mean over each summary's steps, then over summaries
        num_tokens = int(target_mask.sum())
        lengths = target_mask.sum(1)
        rows = lengths.gt(0)
        nll = (token_nll.sum(1)[rows] / lengths[rows]).mean() if rows.any() else token_nll.sum()
        coverage_loss = (token_cov.sum(1)[rows] / lengths[rows]).mean() if rows.any() else token_cov.sum()
        loss = nll + cfg.coverage_loss_weight * coverage_loss if cfg.coverage else nll
        return ForwardOutput(loss, nll, coverage_loss, int(rows.sum()), num_tokens, token_nll)
