# OpenNMT-py 3.5.1 at the pointer-generator's sizes (imported by both OpenNMT drivers before any model is
# built). Its RNN models require enc_hid_size == dec_hid_size and an attention as wide as the decoder; See et
# al.'s model (and ours) has a bidirectional encoder of 2 x H, a decoder of H and an attention 2H wide. Three
# changes from outside, no change to its computations otherwise:
# * the size check is skipped (validate_model_opts sees dec_hid_size = enc_hid_size);
# * its "mlp" GlobalAttention is built with the memory's width (2H) for linear_context, linear_query's output,
#   v and linear_cover; linear_query reads the decoder's H and linear_out maps [context; query] (2H + H) to H;
# * the encoder's final states (2 directions x H, concatenated by OpenNMT) are reduced to the decoder's H by a
#   linear layer + ReLU per state, as See et al.'s code (and ours) does; OpenNMT's own bridge is off.
import os

import onmt.decoders.decoder as decoder_module
import torch
import torch.nn.functional as F
from onmt.modules.global_attention import GlobalAttention, sequence_mask
from onmt.utils.parse import ArgumentParser
from torch import nn

MEMORY = int(os.environ["SYNOPSIS_BENCH_MEMORY_DIM"])


class SizedGlobalAttention(GlobalAttention):
    def __init__(self, dim, coverage=False, attn_type="dot", attn_func="softmax"):
        super().__init__(MEMORY, coverage=coverage, attn_type=attn_type, attn_func=attn_func)
        self.query_dim = dim
        self.linear_query = nn.Linear(dim, MEMORY, bias=True)
        self.linear_out = nn.Linear(MEMORY + dim, dim, bias=self.attn_type == "mlp")

    def forward(self, src, enc_out, src_len=None, coverage=None):  # GlobalAttention.forward, widths apart
        if src.dim() == 2:
            one_step = True
            src = src.unsqueeze(1)
        else:
            one_step = False
        batch, src_l, dim = enc_out.size()
        batch_, target_l, dim_ = src.size()
        if coverage is not None:
            cover = coverage.view(-1).unsqueeze(1)
            enc_out += self.linear_cover(cover).view_as(enc_out)
            enc_out = torch.tanh(enc_out)
        align = self.score(src, enc_out)
        if src_len is not None:
            mask = ~sequence_mask(src_len, max_len=align.size(-1))
            mask = mask.unsqueeze(1)
            align.masked_fill_(~mask, -float("inf"))
        align_vectors = F.softmax(align.view(batch * target_l, src_l), -1).view(batch, target_l, src_l)
        c = torch.bmm(align_vectors, enc_out)
        concat_c = torch.cat([c, src], 2).view(batch * target_l, dim + dim_)
        attn_h = self.linear_out(concat_c).view(batch, target_l, dim_)
        if one_step:
            attn_h = attn_h.squeeze(1)
            align_vectors = align_vectors.squeeze(1)
        return attn_h, align_vectors


decoder_module.GlobalAttention = SizedGlobalAttention
_decoder_init = decoder_module.RNNDecoderBase.__init__
_init_state = decoder_module.RNNDecoderBase.init_state


def decoder_init(self, *args, **kwargs):
    _decoder_init(self, *args, **kwargs)
    self.reduce_state = nn.ModuleList([nn.Linear(MEMORY, self.hidden_size) for _ in range(2)])


def init_state(self, src, enc_out, enc_final_hs):
    _init_state(self, src, enc_out, enc_final_hs)
    self.state["hidden"] = tuple(
        F.relu(linear(h)) for linear, h in zip(self.reduce_state, self.state["hidden"], strict=True)
    )
    batch_size = self.state["hidden"][0].size(1)
    self.state["input_feed"] = self.state["hidden"][0].new_zeros(1, batch_size, self.hidden_size)


decoder_module.RNNDecoderBase.__init__ = decoder_init
decoder_module.RNNDecoderBase.init_state = init_state
_validate = ArgumentParser.validate_model_opts.__func__


def validate_model_opts(cls, model_opt):
    dec_size = model_opt.dec_hid_size
    model_opt.dec_hid_size = model_opt.enc_hid_size
    try:
        _validate(cls, model_opt)
    finally:
        model_opt.dec_hid_size = dec_size


ArgumentParser.validate_model_opts = classmethod(validate_model_opts)
