"""Hie-BART with all heads word-level equals stock BART: max |difference| at bart-base size.

Random-init bart-base (6+6 layers, d_model 768, 12 heads); Hie-BART loads the stock state dict unchanged.
A batch of documents of different lengths (right-padded, a sentence marker every ~20 tokens) goes through
both models in eval mode with both attention backends; printed: max |difference| of the encoder output
(real tokens) and of the logits, for ``word_heads = 12`` (must be <= 1e-6) and, for contrast, 10.

    python benchmarks/hie_bart_equivalence.py   # writes benchmarks/results/hie_bart_equivalence.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from hie_bart import bart_base_config  # the sibling benchmark script (its folder is on sys.path)
from transformers import BartForConditionalGeneration

from synopsis.models.hie_bart import HieBartConfig, HieBartForConditionalGeneration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[300, 171, 64, 233])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).parent / "results" / "hie_bart_equivalence.json"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = bart_base_config()
    marker = config.vocab_size - 1
    width = max(args.lengths)
    ids = torch.full((len(args.lengths), width), config.pad_token_id)
    for row, length in enumerate(args.lengths):
        ids[row, :length] = torch.randint(4, 50000, (length,))
        ids[row, 0], ids[row, length - 1] = config.bos_token_id, config.eos_token_id
        ids[row, 1 : length - 1 : 20] = marker
    mask = (ids != config.pad_token_id).long()
    decoder_ids = torch.randint(4, 50000, (len(args.lengths), 32))
    results = []
    for attn in ("eager", "sdpa"):
        config._attn_implementation = attn
        stock = BartForConditionalGeneration(config).eval()
        with torch.no_grad():
            expected = stock(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
        for word_heads in (12, 10):
            hie_config = HieBartConfig.from_bart_config(
                config, word_heads=word_heads, sentence_start_token_id=marker
            )
            hie_config._attn_implementation = attn
            hie = HieBartForConditionalGeneration(hie_config).eval()
            hie.load_state_dict(stock.state_dict(), strict=True)
            with torch.no_grad():
                got = hie(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
            real = mask.bool()
            encoder = (expected.encoder_last_hidden_state - got.encoder_last_hidden_state)[real].abs().max()
            logits = (expected.logits - got.logits).abs().max()
            results.append(
                {"attention": attn, "word_heads": word_heads, "encoder_max_abs_diff": encoder.item(),
                 "logits_max_abs_diff": logits.item()}
            )  # fmt: skip
            print(
                f"{attn:5s} word_heads {word_heads:2d}/12: encoder max|diff| {encoder.item():.3g}, "
                f"logits max|diff| {logits.item():.3g}"
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"lengths": args.lengths, "results": results}, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
