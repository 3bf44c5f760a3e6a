"""InstructSum: prompts, the block mask, cached == uncached encoding, the source cache, save/load, conversion.

The models are tiny random T5s with the real T5 tokenizer. Their attention weights are scaled up so that
attention is sharp and a mistake in the mask or in the relative positions shows in the outputs; the tests
check that the instructions lead to different outputs, so "identical text" is not a degenerate pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.instructsum import ARTICLE, INSTRUCTIONS, TITLE, prompts, real_rows, sharp_t5, t5_config
from helpers.tiny_models import t5_tokenizer
from transformers import AutoConfig, AutoModelForSeq2SeqLM, T5Config, T5ForConditionalGeneration

from synopsis.models.instructsum import (
    INSTRUCTION_SEGMENT,
    SOURCE_SEGMENT,
    InstructSumT5Config,
    InstructSumT5ForConditionalGeneration,
    PromptIds,
    SourceCache,
    block_attention_mask,
    collate_prompts,
    convert_to_instructsum,
    encode_source,
    encode_with_instruction,
    encoder_flops,
    full_prompt,
    instruction_prompt,
    prompt_parts,
    source_prompt,
    summarize_with_instructions,
    tokenize_prompt,
)

TOL = 1e-5


@pytest.fixture(scope="module")
def tokenizer(shared_data: Path):
    return t5_tokenizer(shared_data / "tokenizers")


# --------------------------------------------------------------------------------------------- prompts
def test_prompts_are_the_papers_formats() -> None:
    assert instruction_prompt("Mention the maker.") == (
        "Instructions: Mention the maker. According to the above instructions, summarize the following "
        "article."
    )
    assert source_prompt("X-T2", "A camera.", with_instruction=True) == "Title: X-T2 Article: A camera."
    assert source_prompt("X-T2", "A camera.", with_instruction=False) == (
        "Summarize the following article. Title: X-T2 Article: A camera."
    )
    assert full_prompt("Mention the maker.", "X-T2", "A  camera.\n") == (
        "Instructions: Mention the maker. According to the above instructions, summarize the following "
        "article. Title: X-T2 Article: A camera."
    )
    # without an instruction, the whole prompt (fixed lead-in included) is the source part
    assert prompt_parts(None, "X-T2", "A camera.") == (
        None,
        "Summarize the following article. Title: X-T2 Article: A camera.",
    )
    assert prompt_parts("  ", "X-T2", "A camera.")[0] is None
    assert source_prompt(None, "A camera.", with_instruction=True) == "Article: A camera."


@pytest.mark.parametrize("instruction", [INSTRUCTIONS[1], None])
def test_segments_are_the_tokenization_of_the_prompt_string(tokenizer, instruction: str | None) -> None:
    prompt = tokenize_prompt(tokenizer, instruction, TITLE, ARTICLE)
    assert prompt.input_ids == tokenizer(full_prompt(instruction, TITLE, ARTICLE))["input_ids"]
    assert prompt.source_ids[-1] == tokenizer.eos_token_id
    assert prompt.segment_ids == [1] * len(prompt.instruction_ids) + [0] * len(prompt.source_ids)
    assert bool(prompt.instruction_ids) == (instruction is not None)
    batch = collate_prompts([prompt, tokenize_prompt(tokenizer, "Short.", "T", "A.")], tokenizer.pad_token_id)
    assert batch["segment_ids"][1].tolist().count(INSTRUCTION_SEGMENT) == len(
        tokenize_prompt(tokenizer, "Short.", "T", "A.").instruction_ids
    )
    assert (batch["segment_ids"][batch["attention_mask"] == 0] == SOURCE_SEGMENT).all()


def test_truncation_keeps_the_source_eos_and_each_part_in_its_budget(tokenizer) -> None:
    prompt = tokenize_prompt(
        tokenizer, INSTRUCTIONS[1] * 5, TITLE, ARTICLE * 20, max_source_tokens=50, max_instruction_tokens=20
    )
    # the whole prompt fits max_source_tokens (the paper's first 1024 of the whole input): the instruction
    # part takes its 20, the source part the other 30 (issue 27 item 9; it used to take 50 of its own)
    assert len(prompt.source_ids) == 30 and prompt.source_ids[-1] == tokenizer.eos_token_id
    assert len(prompt.instruction_ids) == 20
    # only the instruction's words and the article are cut, never the template or the title
    instruction = tokenizer.decode(prompt.instruction_ids)
    assert instruction.startswith("Instructions:")
    assert instruction.endswith("According to the above instructions, summarize the following article.")
    source = tokenizer.decode(prompt.source_ids, skip_special_tokens=True)
    assert source.startswith(f"Title: {TITLE} Article:")


# --------------------------------------------------------------------------------------------- the mask
def test_block_mask_semantics() -> None:
    segments = torch.tensor([[1, 1, 0, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    allowed = block_attention_mask(segments, mask)[0, 0] == 0
    expected = torch.tensor(
        [
            [1, 1, 1, 1, 0, 0],  # instruction queries: every real key
            [1, 1, 1, 1, 0, 0],
            [0, 0, 1, 1, 0, 0],  # source queries: real source keys only
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0, 0],  # padding queries (segment 0) see the source: no fully masked rows
            [0, 0, 1, 1, 0, 0],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(allowed, expected)
    assert block_attention_mask(segments, mask).min() == torch.finfo(torch.float32).min
    with pytest.raises(ValueError, match="segment_ids must be 1"):
        block_attention_mask(torch.tensor([[2, 0]]), None)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_source_rows_equal_a_stock_t5_pass_on_the_source_alone(tokenizer, attn: str) -> None:
    t5 = sharp_t5(tokenizer, attn)
    model = convert_to_instructsum(t5)
    batch = collate_prompts(prompts(tokenizer), tokenizer.pad_token_id)
    source_ids = torch.tensor([prompts(tokenizer)[0].source_ids])
    with torch.no_grad():
        uncached = model.encoder(**batch).last_hidden_state
        stock_source = t5.encoder(input_ids=source_ids).last_hidden_state[0]
        stock_full = t5.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    for row in range(len(INSTRUCTIONS)):
        source_rows = uncached[row][(batch["segment_ids"][row] == 0) & (batch["attention_mask"][row] == 1)]
        assert (source_rows - stock_source).abs().max() <= TOL
    # and the mask does something: with full attention the source rows see the instruction
    full_source = stock_full.last_hidden_state[0, len(prompts(tokenizer)[0].instruction_ids) :]
    assert (full_source[: stock_source.shape[0]] - stock_source).abs().max() > 1e-2


def test_relative_positions_source_rows_shift_invariant_instruction_rows_not(tokenizer) -> None:
    """A hole between I and S moves the source by one position: source rows unchanged, instruction rows not.

    This is why the cached instruction pass must place the source at offset L_I (as it does).
    """
    model = convert_to_instructsum(sharp_t5(tokenizer))
    prompt = prompts(tokenizer)[1]
    n_instr = len(prompt.instruction_ids)
    batch = collate_prompts([prompt], tokenizer.pad_token_id)
    ids, mask, segments = batch["input_ids"], batch["attention_mask"], batch["segment_ids"]
    hole = torch.tensor([[tokenizer.pad_token_id]])
    ids2 = torch.cat([ids[:, :n_instr], hole, ids[:, n_instr:]], 1)
    mask2 = torch.cat([mask[:, :n_instr], torch.zeros_like(hole), mask[:, n_instr:]], 1)
    segments2 = torch.cat([segments[:, :n_instr], torch.zeros_like(hole), segments[:, n_instr:]], 1)
    with torch.no_grad():
        a = model.encoder(input_ids=ids, attention_mask=mask, segment_ids=segments).last_hidden_state[0]
        b = model.encoder(input_ids=ids2, attention_mask=mask2, segment_ids=segments2).last_hidden_state[0]
    assert (a[n_instr:] - b[n_instr + 1 :]).abs().max() <= TOL
    assert (a[:n_instr] - b[:n_instr]).abs().max() > 1e-3


def test_training_gradients_do_not_flow_from_instruction_into_source_rows(tokenizer) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    batch = collate_prompts(prompts(tokenizer)[:1], tokenizer.pad_token_id)
    embeds = model.shared(batch["input_ids"]).detach().requires_grad_(True)
    hidden = model.encoder(
        inputs_embeds=embeds, attention_mask=batch["attention_mask"], segment_ids=batch["segment_ids"]
    ).last_hidden_state
    is_instruction = batch["segment_ids"][0] == 1
    hidden[0, ~is_instruction].sum().backward()
    assert embeds.grad[0, is_instruction].abs().max() == 0
    assert embeds.grad[0, ~is_instruction].abs().max() > 0
    # the seq2seq loss trains through the same mask
    labels = torch.tensor([tokenizer("A mirrorless camera.")["input_ids"]])
    loss = model(**batch, labels=labels).loss
    assert torch.isfinite(loss)
    loss.backward()


# --------------------------------------------------------------------------------------------- cache == full
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_cached_equals_uncached_for_several_instructions(tokenizer, attn: str) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer, attn))
    assert model.config._attn_implementation == attn
    items = prompts(tokenizer)
    assert len({len(p.instruction_ids) for p in items}) == len(items)  # different lengths: padding inside
    batch = collate_prompts(items, tokenizer.pad_token_id)
    instructions = collate_prompts([PromptIds(p.instruction_ids, []) for p in items], tokenizer.pad_token_id)
    with torch.no_grad():
        uncached = model.encoder(**batch).last_hidden_state
        source = encode_source(model, torch.tensor([items[0].source_ids]))
        cached, mask = encode_with_instruction(
            model, source, instructions["input_ids"], instructions["attention_mask"]
        )
    assert torch.equal(mask, batch["attention_mask"])  # the same token layout as the uncached pass
    for got, want in zip(real_rows(cached.last_hidden_state, mask), real_rows(uncached, mask), strict=True):
        assert (got - want).abs().max() <= TOL
    assert (cached.last_hidden_state[mask == 0] == 0).all()

    settings = dict(num_beams=2, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    full = model.generate(**batch, **settings)  # segment_ids go through generate(), per beam
    from_cache = model.generate(encoder_outputs=cached, attention_mask=mask, **settings)
    assert torch.equal(full, from_cache)
    texts = tokenizer.batch_decode(full, skip_special_tokens=True)
    assert len(set(texts)) == len(texts), texts  # the instructions change the output


def test_a_batch_of_padded_sources_each_with_its_instruction(tokenizer) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    items = [
        tokenize_prompt(tokenizer, INSTRUCTIONS[0], TITLE, ARTICLE),
        tokenize_prompt(tokenizer, INSTRUCTIONS[1], "Other", "A much shorter article. It has two sentences."),
    ]
    batch = collate_prompts(items, tokenizer.pad_token_id)
    sources = collate_prompts([PromptIds([], p.source_ids) for p in items], tokenizer.pad_token_id)
    instructions = collate_prompts([PromptIds(p.instruction_ids, []) for p in items], tokenizer.pad_token_id)
    with torch.no_grad():
        uncached = model.encoder(**batch).last_hidden_state
        source = encode_source(model, sources["input_ids"], sources["attention_mask"])
        cached, mask = encode_with_instruction(
            model, source, instructions["input_ids"], instructions["attention_mask"]
        )
    assert torch.equal(mask, batch["attention_mask"])
    for got, want in zip(real_rows(cached.last_hidden_state, mask), real_rows(uncached, mask), strict=True):
        assert (got - want).abs().max() <= TOL


def test_encode_prompts_equals_the_block_mask_pass_of_a_mixed_batch(tokenizer) -> None:
    """Issue 25 item 3: the one cached path lays out a batch of two sources, with and without instructions,
    exactly as the uncached block-mask pass does (float64: equal to rounding), one source pass a source."""
    model = convert_to_instructsum(sharp_t5(tokenizer)).double()
    other = "A much shorter article. It has two sentences."
    items = [
        *prompts(tokenizer, [INSTRUCTIONS[1], None, INSTRUCTIONS[0]]),
        tokenize_prompt(tokenizer, INSTRUCTIONS[2], "Other", other),
        tokenize_prompt(tokenizer, None, "Other", other),
    ]
    batch = collate_prompts(items, tokenizer.pad_token_id)
    cache = SourceCache()
    with torch.no_grad():
        uncached = model.encoder(**batch).last_hidden_state
        encoded = cache.encode_prompts(model, items)
    cached, mask = encoded.encoder_outputs, encoded.attention_mask
    assert torch.equal(mask, batch["attention_mask"])
    assert cached.last_hidden_state.dtype == torch.float64
    for got, want in zip(real_rows(cached.last_hidden_state, mask), real_rows(uncached, mask), strict=True):
        assert (got - want).abs().max() <= 1e-9
    assert (cached.last_hidden_state[mask == 0] == 0).all()
    # four distinct source parts (with and without an instruction differ): four source passes, one each
    assert model.encoder.source_passes == cache.encodings == len(cache) == 4
    assert model.encoder.instruction_passes == 2 and model.encoder.full_passes == 1
    with pytest.raises(ValueError, match="at least one prompt"):
        cache.encode_prompts(model, [])


def test_prompt_ids_from_segments_round_trip_and_refuse_source_first() -> None:
    prompt = PromptIds([5, 6], [7, 8, 1])
    assert PromptIds.from_segments(prompt.input_ids, prompt.segment_ids) == prompt
    with pytest.raises(ValueError, match="the instruction part, then the source part"):
        PromptIds.from_segments([7, 5, 1], [SOURCE_SEGMENT, INSTRUCTION_SEGMENT, SOURCE_SEGMENT])


def test_summarize_with_instructions_cached_uncached_and_plain_t5(tokenizer) -> None:
    t5 = sharp_t5(tokenizer)
    model = convert_to_instructsum(t5)
    asks = [*INSTRUCTIONS, None, INSTRUCTIONS[0]]
    settings = dict(num_beams=2, max_new_tokens=10, min_new_tokens=10)
    cache = SourceCache()
    cached = summarize_with_instructions(
        model, tokenizer, ARTICLE, asks, title=TITLE, cache=cache, **settings
    )
    full = summarize_with_instructions(
        model, tokenizer, ARTICLE, asks, title=TITLE, use_cache=False, **settings
    )
    assert cached == full and len(cached) == len(asks)
    assert cached[0] == cached[-1] and len(set(cached[:4])) == 4
    assert len(cache) == 2  # the source part with and without an instruction
    # a plain T5 checkpoint reads the paper's prompt with full attention (no cache, no segments)
    plain = summarize_with_instructions(t5, tokenizer, ARTICLE, asks, title=TITLE, **settings)
    assert len(plain) == len(asks) and plain[:3] != cached[:3]
    # with no instruction the block mask is full attention: the converted model equals T5
    assert plain[3] == cached[3]


# --------------------------------------------------------------------------------------------- the cache
def test_second_instruction_runs_no_source_pass(tokenizer) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    seen: list[int] = []  # query lengths entering the first encoder layer, one per encoder pass
    hook = model.encoder.block[0].register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape[1]))
    cache = SourceCache()
    items = prompts(tokenizer)
    source_ids = torch.tensor([items[0].source_ids])
    try:
        for n, item in enumerate(items):
            seen.clear()
            source = cache.get_or_encode(model, source_ids)
            encode_with_instruction(model, source, torch.tensor([item.instruction_ids]))
            if n == 0:  # the source pass, then the instruction pass
                assert seen == [len(item.source_ids), len(item.instruction_ids)]
            else:  # the instruction's own tokens only
                assert seen == [len(item.instruction_ids)]
    finally:
        hook.remove()
    assert model.encoder.source_passes == 1
    assert model.encoder.instruction_passes == len(items)
    assert model.encoder.full_passes == 0
    assert (cache.hits, cache.misses) == (len(items) - 1, 1)


def test_changed_document_is_never_served_from_the_cache(tokenizer, monkeypatch) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    cache = SourceCache()
    original = torch.tensor([prompts(tokenizer)[0].source_ids])
    changed = original.clone()
    changed[0, 5] += 1
    first = cache.get_or_encode(model, original)
    second = cache.get_or_encode(model, changed)
    assert (cache.hits, cache.misses, len(cache)) == (0, 2, 2)
    assert not torch.equal(first.hidden_states, second.hidden_states)
    assert torch.equal(second.input_ids, changed)
    # even if two documents' keys collided, the token check refuses the stored one
    monkeypatch.setattr(SourceCache, "key", staticmethod(lambda model, ids: "same"))
    colliding = SourceCache()
    colliding.get_or_encode(model, original)
    again = colliding.get_or_encode(model, changed)
    assert torch.equal(again.input_ids, changed) and colliding.hits == 0
    # another model never gets this model's encodings
    other = convert_to_instructsum(sharp_t5(tokenizer, seed=1))
    assert cache.get(other, original) is None


def test_lru_eviction_by_bytes(tokenizer) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    sources = [
        torch.tensor([tokenize_prompt(tokenizer, "x", "T", f"Document {i}.").source_ids]) for i in range(4)
    ]
    sizes = {encode_source(model, s).nbytes for s in sources}
    assert len(sizes) == 1
    size = sizes.pop()
    cache = SourceCache(max_bytes=2 * size + size // 2)  # room for two
    cache.get_or_encode(model, sources[0])
    cache.get_or_encode(model, sources[1])
    cache.get_or_encode(model, sources[0])  # 0 is now the most recently used
    cache.get_or_encode(model, sources[2])  # evicts 1
    assert cache.evictions == 1 and cache.bytes == 2 * size and cache.bytes <= cache.max_bytes
    assert cache.get(model, sources[1]) is None
    assert cache.get(model, sources[0]) is not None and cache.get(model, sources[2]) is not None
    tiny = SourceCache(max_bytes=size - 1)  # an encoding larger than the budget is returned, not stored
    assert tiny.get_or_encode(model, sources[3]).nbytes == size and len(tiny) == 0 and tiny.bytes == 0


def test_expanded_cache_serves_a_batch_and_refuses_bad_masks(tokenizer) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    source = encode_source(model, torch.tensor([prompts(tokenizer)[0].source_ids]))
    assert source.expand(3).keys[0].shape[0] == 3
    assert source.expand(3).keys[0].data_ptr() == source.keys[0].data_ptr()  # a view, not a copy
    holes = torch.tensor([[1, 0, 1]])
    with pytest.raises(ValueError, match="right-padded"):
        encode_with_instruction(model, source, torch.tensor([[5, 6, 7]]), holes)
    with pytest.raises(TypeError, match="InstructSum model"):
        encode_source(sharp_t5(tokenizer), torch.tensor([[5, 6, 1]]))


# --------------------------------------------------------------------------------------------- conversion
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_convert_keeps_t5_outputs_without_instruction(tokenizer, attn: str) -> None:
    t5 = sharp_t5(tokenizer, attn)
    model = convert_to_instructsum(t5)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in t5.parameters())
    batch = collate_prompts(
        [tokenize_prompt(tokenizer, None, TITLE, ARTICLE), tokenize_prompt(tokenizer, None, "T", "Short.")],
        tokenizer.pad_token_id,
    )
    assert (batch["segment_ids"] == 0).all()
    decoder_ids = torch.tensor([[0, 37, 1023, 9]] * 2)
    with torch.no_grad():
        want = t5(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_ids,
        )
        got = model(**batch, decoder_input_ids=decoder_ids)
        without_segments = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_ids,
        )
    assert (want.logits - got.logits).abs().max() <= TOL
    assert torch.equal(want.logits, without_segments.logits)


def test_convert_keeps_flan_t5_settings(tokenizer) -> None:
    t5 = sharp_t5(tokenizer, feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    assert t5.config.scale_decoder_outputs is False
    model = convert_to_instructsum(t5)
    assert model.config.scale_decoder_outputs is False and model.config.is_gated_act
    ids = torch.tensor([tokenize_prompt(tokenizer, None, TITLE, ARTICLE).input_ids])
    with torch.no_grad():
        assert torch.equal(t5(input_ids=ids, decoder_input_ids=ids[:, :3]).logits,
                           model(input_ids=ids, decoder_input_ids=ids[:, :3]).logits)  # fmt: skip


def test_random_init_is_t5s_init(tokenizer) -> None:
    """A randomly initialised InstructSum model (training from scratch) has T5's scaled init, not N(0, 1)."""
    config = t5_config(tokenizer, d_model=64, d_ff=256)
    torch.manual_seed(0)
    stock = T5ForConditionalGeneration(config).state_dict()
    torch.manual_seed(0)
    ours = InstructSumT5ForConditionalGeneration(InstructSumT5Config.from_base(config)).state_dict()
    assert ours.keys() == stock.keys()
    for name, value in stock.items():
        if value.dim() == 2 and value.std() > 0:
            assert 0.8 < ours[name].std() / value.std() < 1.25, name


def test_save_and_load_round_trip(tokenizer, tmp_path: Path) -> None:
    model = convert_to_instructsum(sharp_t5(tokenizer))
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).model_type == "instructsum_t5"
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert isinstance(loaded, InstructSumT5ForConditionalGeneration)
    assert isinstance(loaded.config, InstructSumT5Config)
    batch = collate_prompts(prompts(tokenizer), tokenizer.pad_token_id)
    with torch.no_grad():
        a = model(**batch, decoder_input_ids=batch["input_ids"][:, :4]).logits
        b = loaded(**batch, decoder_input_ids=batch["input_ids"][:, :4]).logits
    assert torch.equal(a, b)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    assert convert_to_instructsum(loaded) is loaded


def test_encoder_flops_match_the_papers_figure() -> None:
    """FLAN-T5-Base's encoder on 1024 tokens: 174 GFLOPs in the paper (linear layers, 2 FLOPs per MAC)."""
    flan_base = T5Config(
        d_model=768, d_kv=64, num_heads=12, d_ff=2048, num_layers=12, feed_forward_proj="gated-gelu"
    )
    assert abs(encoder_flops(flan_base, 1024, attention=False) / 1e9 - 174) < 0.5
    full = encoder_flops(flan_base, 1065)
    cached = encoder_flops(flan_base, 41, key_tokens=1065)
    assert full / cached > 20


def test_concurrent_misses_on_one_source_encode_it_once(tokenizer, monkeypatch) -> None:
    """Issue 27 item 10: the encoding ran outside the lock, so N requests for one new document encoded it
    N times. Now one thread encodes and the others wait for its result."""
    import threading
    import time

    from synopsis.models.instructsum import cache as instructsum

    model = convert_to_instructsum(sharp_t5(tokenizer)).eval()
    cache = SourceCache()
    ids = torch.tensor([prompts(tokenizer)[0].source_ids])
    calls = []
    original = instructsum.encode_source

    def slow_encode(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.3)  # long enough for every thread to miss meanwhile
        return original(*args, **kwargs)

    monkeypatch.setattr(instructsum, "encode_source", slow_encode)
    barrier = threading.Barrier(4)
    results = [None] * 4

    def request(i: int) -> None:
        barrier.wait()
        results[i] = cache.get_or_encode(model, ids)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and cache.encodings == 1 and len(cache) == 1
    assert all(r is results[0] for r in results)


def test_flex_attention_is_refused_on_the_cached_path(tokenizer) -> None:
    """Issue 27 item 10: flex_attention on the cached path crashed the process (munmap_chunk)."""
    model = convert_to_instructsum(sharp_t5(tokenizer)).eval()
    model.get_encoder().config._attn_implementation = "flex_attention"
    ids = torch.tensor([prompts(tokenizer)[0].source_ids])
    with pytest.raises(ValueError, match="source cache support attn_implementation eager or sdpa"):
        encode_source(model, ids)
    with pytest.raises(ValueError, match="not 'flex_attention'"):
        SourceCache().get_or_encode(model, ids)
