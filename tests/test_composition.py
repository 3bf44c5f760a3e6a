"""HIBRIDS on InstructSum's T5 (``instructsum_hibrids_t5``): the methods compose at T5's position bias.

With random nonzero tables the cached encoding (source pass, then instruction passes) equals the uncached
block-mask pass with the biases on (float64, <= 1e-9); zero tables, or no section inputs, give InstructSum
alone; the same source under another section tree never shares a cache entry; both conversion orders give
one type that round-trips through the Auto classes and is initialised as T5 when built from its config; the
summarizer feeds the composed model its section inputs through the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.hibrids import _spread
from helpers.instructsum import ARTICLE, INSTRUCTIONS, TITLE, real_rows, sharp_t5
from helpers.instructsum_path import DOCUMENT, instruction_run
from helpers.models import randomize_tables
from helpers.tiny_models import t5_config, t5_tokenizer
from transformers import AutoModelForSeq2SeqLM

from synopsis.config import DecodingOptions
from synopsis.models.hibrids import (
    END_NODE,
    OUTSIDE_NODES,
    QUESTION_NODE,
    START_NODE,
    InstructSumHibridsT5Config,
    InstructSumHibridsT5ForConditionalGeneration,
    convert_to_hibrids,
    num_buckets,
)
from synopsis.models.instructsum import (
    PromptIds,
    SourceCache,
    SourceSections,
    collate_prompts,
    convert_to_instructsum,
    tokenize_prompt,
)
from synopsis.models.lengths import generate_kwargs

OTHER = "A much shorter article. It has two sentences."
DECODING = dict(num_beams=2, max_new_tokens=8, min_new_tokens=8, do_sample=False)


@pytest.fixture(scope="module")
def tokenizer(shared_data: Path):
    return t5_tokenizer(shared_data / "tokenizers")


def tree(length: int, sections: int, seed: int) -> SourceSections:
    """A source part of ``length`` tokens: the first two outside every section, the rest in ``sections``
    consecutive sections, random relation buckets."""
    generator = torch.Generator().manual_seed(seed)
    ids = [-1, -1] + [i * sections // (length - 2) for i in range(length - 2)]
    relations = torch.randint(0, num_buckets(), (sections, sections), generator=generator)
    return SourceSections.from_tensors(ids, relations)


def with_trees(items: list[PromptIds], seed: int = 0) -> list[PromptIds]:
    """Each distinct source part gets its own tree (3 or 4 sections)."""
    trees: dict[tuple[int, ...], SourceSections] = {}
    for prompt in items:
        key = tuple(prompt.source_ids)
        trees.setdefault(key, tree(len(key), 3 + len(trees) % 2, seed + len(trees)))
    return [PromptIds(p.instruction_ids, p.source_ids, trees[tuple(p.source_ids)]) for p in items]


def mixed_batch(tokenizer) -> list[PromptIds]:
    """Two sources, with and without instructions, instructions of different lengths."""
    items = [tokenize_prompt(tokenizer, i, TITLE, ARTICLE) for i in (INSTRUCTIONS[1], None, INSTRUCTIONS[0])]
    items += [tokenize_prompt(tokenizer, i, "Other", OTHER) for i in (INSTRUCTIONS[2], None)]
    return with_trees(items)


def uncached_inputs(items: list[PromptIds], pad: int) -> dict[str, torch.Tensor]:
    """The block-mask pass's inputs: the prompts' ids and segments, each token's section (instruction tokens
    and padding -1), the relations padded with -1."""
    batch = collate_prompts(items, pad)
    size = max(len(p.sections.relations) for p in items)
    section_ids = torch.full_like(batch["input_ids"], -1)
    relations = torch.full((len(items), size, size), -1, dtype=torch.long)
    for row, prompt in enumerate(items):
        ids, table = prompt.sections.tensors()
        start = len(prompt.instruction_ids)
        section_ids[row, start : start + ids.shape[1]] = ids[0]
        relations[row, : table.shape[1], : table.shape[1]] = table[0]
    return {**batch, "section_ids": section_ids, "section_relations": relations}


def composed(tokenizer, tables: bool = True) -> tuple[torch.nn.Module, torch.nn.Module]:
    """An InstructSum T5 in float64 and HIBRIDS on it (random nonzero tables unless ``tables`` is False)."""
    instructsum = convert_to_instructsum(sharp_t5(tokenizer)).double().eval()
    model = convert_to_hibrids(instructsum).eval()
    assert type(model) is InstructSumHibridsT5ForConditionalGeneration
    if tables:
        randomize_tables(model, native=True)
    return instructsum, model


def test_cached_equals_the_block_mask_pass_with_the_biases_on(tokenizer) -> None:
    _, model = composed(tokenizer)
    items = mixed_batch(tokenizer)
    inputs = uncached_inputs(items, tokenizer.pad_token_id)
    cache = SourceCache()
    with torch.no_grad():
        uncached = model.encoder(**inputs).last_hidden_state
        unbiased = model.encoder(**collate_prompts(items, tokenizer.pad_token_id)).last_hidden_state
        encoded = cache.encode_prompts(model, items)
    mask = encoded.attention_mask
    assert torch.equal(mask, inputs["attention_mask"])
    assert (uncached - unbiased)[mask.bool()].abs().max() > 1e-2  # the tables reach the encoder
    rows = zip(
        real_rows(encoded.encoder_outputs.last_hidden_state, mask), real_rows(uncached, mask), strict=True
    )
    for got, want in rows:
        assert (got - want).abs().max() <= 1e-9
    # four distinct (source, tree) pairs: one source pass each, two instruction passes
    assert model.encoder.source_passes == cache.encodings == len(cache) == 4
    assert model.encoder.instruction_passes == 2
    # HIBRIDS-DEC: the decoder gets the sections laid out as the encoder's states
    assert torch.equal(encoded.section_ids, inputs["section_ids"])
    assert torch.equal(encoded.section_relations, inputs["section_relations"])
    full = model.generate(**inputs, **DECODING)
    assert torch.equal(cache.generate(model, items, **DECODING), full)
    with torch.no_grad():
        labels = full[:, 1:].contiguous()
        logits = model(**inputs, labels=labels).logits
        from_cache = model(**encoded.generate_kwargs(), labels=labels).logits
    assert (logits - from_cache).abs().max() <= 1e-9


def test_zero_tables_are_instructsum_alone(tokenizer) -> None:
    instructsum, model = composed(tokenizer, tables=False)
    items = mixed_batch(tokenizer)
    inputs = uncached_inputs(items, tokenizer.pad_token_id)
    plain_items = [PromptIds(p.instruction_ids, p.source_ids) for p in items]
    batch = collate_prompts(items, tokenizer.pad_token_id)
    decoder_ids = inputs["input_ids"][:, :5]
    with torch.no_grad():
        assert torch.equal(
            model.encoder(**inputs).last_hidden_state, instructsum.encoder(**batch).last_hidden_state
        )
        want = instructsum(**batch, decoder_input_ids=decoder_ids).logits
        got = model(**inputs, decoder_input_ids=decoder_ids).logits
        cached = SourceCache().encode_prompts(model, items)
        alone = SourceCache().encode_prompts(instructsum, plain_items)
    # The encoder is exact; HIBRIDS' second-to-last cross-attention runs its own eager form (it keeps its
    # probabilities), whose float32 softmax rounds as HIBRIDS on a stock T5 does (logits of size ~10).
    assert (got - want).abs().max() <= 1e-5
    assert torch.equal(cached.encoder_outputs.last_hidden_state, alone.encoder_outputs.last_hidden_state)
    assert torch.equal(
        SourceCache().generate(model, items, **DECODING),
        SourceCache().generate(instructsum, plain_items, **DECODING),
    )


def test_no_sections_passed_is_instructsum_alone(tokenizer) -> None:
    instructsum, model = composed(tokenizer)  # nonzero tables, but no section inputs
    items = [PromptIds(p.instruction_ids, p.source_ids) for p in mixed_batch(tokenizer)]
    batch = collate_prompts(items, tokenizer.pad_token_id)
    with torch.no_grad():
        got = model(**batch, decoder_input_ids=batch["input_ids"][:, :5]).logits
        want = instructsum(**batch, decoder_input_ids=batch["input_ids"][:, :5]).logits
        cached = SourceCache().encode_prompts(model, items)
        alone = SourceCache().encode_prompts(instructsum, items)
    assert torch.equal(got, want)
    assert torch.equal(cached.encoder_outputs.last_hidden_state, alone.encoder_outputs.last_hidden_state)
    assert cached.section_ids is None
    with pytest.raises(ValueError, match="reads no section inputs"):
        SourceCache().encode_prompts(instructsum, mixed_batch(tokenizer))


def test_the_same_tokens_under_another_tree_never_share_a_cache_entry(tokenizer) -> None:
    _, model = composed(tokenizer)
    prompt = tokenize_prompt(tokenizer, INSTRUCTIONS[0], TITLE, ARTICLE)
    length = len(prompt.source_ids)
    first, second = tree(length, 3, seed=0), tree(length, 3, seed=5)
    assert first.ids == second.ids and first.relations != second.relations
    shallow = tree(length, 2, seed=0)  # other section ids too
    items = [PromptIds(prompt.instruction_ids, prompt.source_ids, t) for t in (first, second, shallow, first)]
    cache = SourceCache()
    encoded = cache.encode_prompts(model, items)
    assert cache.encodings == len(cache) == 3 and model.encoder.source_passes == 3
    hidden = encoded.encoder_outputs.last_hidden_state
    # Rows 0 and 3 share one cache entry (the same source tensor is reused: bit-equal by construction), but
    # each row's instruction tokens are computed as a row of the batch, and kernels may sum another row in
    # another order (they differ in the last bits on some CPUs): a float64 tolerance, far below the gap
    # to another tree.
    assert cache.get(model, torch.tensor([prompt.source_ids]), *first.tensors()) is not None
    torch.testing.assert_close(hidden[0], hidden[3], rtol=1e-12, atol=1e-12)
    assert (hidden[0] - hidden[1]).abs().max() > 1e-3 and (hidden[0] - hidden[2]).abs().max() > 1e-3
    ids = torch.tensor([prompt.source_ids])
    keys = {cache.key(model, ids, *t.tensors()) for t in (first, second, shallow)}
    assert len(keys | {cache.key(model, ids)}) == 4
    assert cache.get(model, ids) is None  # the bare ids are not the entry of any tree
    stored = cache.get(model, ids, *second.tensors())
    assert stored is not None and torch.equal(stored.section_relations, second.tensors()[1])


def test_both_conversion_orders_give_one_type_that_round_trips(shared_data: Path, tmp_path: Path) -> None:
    from helpers.tiny_models import save_tiny_t5

    from synopsis.models.seq2seq import convert_checkpoint, convert_seq2seq, load_seq2seq

    source = save_tiny_t5(tmp_path / "t5", shared_data / "tokenizers")
    model, tokenizer = load_seq2seq(source)
    first = convert_seq2seq("hibrids", convert_seq2seq("instructsum", model, tokenizer), tokenizer)
    model, tokenizer = load_seq2seq(source)
    second = convert_seq2seq("instructsum", convert_seq2seq("hibrids", model, tokenizer), tokenizer)
    for converted in (first, second):
        assert type(converted) is InstructSumHibridsT5ForConditionalGeneration
        assert converted.config.model_type == "instructsum_hibrids_t5" and converted.config.hibrids_encoder
        assert converted.generation_config.num_beams == 2  # InstructSum's decoding, in either order
    assert first.state_dict().keys() == second.state_dict().keys()
    for name, value in first.state_dict().items():
        assert torch.equal(value, second.state_dict()[name]), name

    # the CLI's path; the saved model reloads by its config alone, tables and all
    instructsum = convert_checkpoint("instructsum", source, tmp_path / "is")
    out = convert_checkpoint("hibrids", instructsum, tmp_path / "composed")
    loaded, _ = load_seq2seq(out)
    assert type(loaded) is InstructSumHibridsT5ForConditionalGeneration
    randomize_tables(loaded, native=True)
    loaded.save_pretrained(tmp_path / "trained")
    again = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "trained")
    assert type(again) is InstructSumHibridsT5ForConditionalGeneration
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]), name


def test_built_from_its_config_it_has_t5s_init() -> None:
    base = t5_config(d_model=64, d_ff=128, d_kv=16)
    torch.manual_seed(0)
    stock = _spread(AutoModelForSeq2SeqLM.from_config(base))
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(InstructSumHibridsT5Config.from_base(base))
    assert type(model) is InstructSumHibridsT5ForConditionalGeneration
    spread = _spread(model)
    assert spread.keys() == stock.keys()
    off = {n: (spread[n], stock[n]) for n in stock if not 0.8 < spread[n] / stock[n] < 1.25}
    assert not off, off
    tables = torch.cat([p.detach().flatten() for n, p in model.named_parameters() if "hibrids" in n])
    assert 0.015 < float(tables.std()) < 0.025  # N(0, 0.02), as HIBRIDS initialises them


def test_the_summarizer_feeds_the_composed_model_its_sections_through_the_cache(
    tokenizer, tmp_path: Path, monkeypatch
) -> None:
    from synopsis.models.seq2seq import convert_checkpoint
    from synopsis.summarizers import load_summarizer

    model = sharp_t5(tokenizer)
    model.save_pretrained(tmp_path / "t5")
    tokenizer.save_pretrained(tmp_path / "t5")
    out = convert_checkpoint(
        "hibrids", convert_checkpoint("instructsum", tmp_path / "t5", tmp_path / "is"), tmp_path / "c"
    )
    summarizer = load_summarizer(model=out)
    short = DecodingOptions(max_length=6)
    randomize_tables(summarizer.model, native=True)
    seen: list[PromptIds] = []
    one_path = SourceCache.encode_prompts

    def spy(self, model, prompts):  # noqa: ANN001, ANN202
        seen.extend(prompts)
        return one_path(self, model, prompts)

    monkeypatch.setattr(SourceCache, "encode_prompts", spy)
    documents = [DOCUMENT] * len(INSTRUCTIONS)
    cached = summarizer.summarize(documents, INSTRUCTIONS, decoding=short)
    assert summarizer.cache is not None and summarizer.cache.encodings == 1
    assert len(seen) == len(INSTRUCTIONS) and all(p.sections is not None for p in seen)
    # the document's sections after the three outside nodes (question, start, end; issue 41 item 3)
    assert len({p.sections for p in seen}) == 1
    assert len(seen[0].sections.relations) == len(DOCUMENT.sections) + OUTSIDE_NODES
    assert set(seen[0].sections.ids) > {START_NODE, END_NODE}  # the source's tokens carry their sections

    # the same as the uncached pass with the registry's inputs (segments and sections)
    encodings = summarizer.inputs.encode_sources(documents, INSTRUCTIONS)
    for encoding in encodings:  # the instruction is the question node, the source's words are not
        by_segment: list[set[int]] = [set(), set()]
        for segment, node in zip(encoding.segment_ids, encoding.section_ids, strict=True):
            by_segment[segment].add(node)
        assert by_segment[1] == {QUESTION_NODE} and QUESTION_NODE not in by_segment[0]
    batch = summarizer.inputs.model_inputs(summarizer.inputs.collate(encodings))
    assert {"segment_ids", "section_ids", "section_relations"} <= batch.keys()
    with torch.no_grad():
        full = summarizer.model.generate(
            **batch, **generate_kwargs(short, summarizer.model.generation_config)
        )
    texts = summarizer.tokenizer.batch_decode(
        full, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    assert cached == [text.strip() for text in texts]


def test_cli_convert_then_train_reads_segments_and_sections(tokenizer, tmp_path: Path) -> None:
    """``synopsis convert instructsum`` then ``convert hibrids`` (the CLI), then two training steps: the
    model gets the block mask's segments and the sections, and the HIBRIDS tables learn."""
    from helpers.instructsum_path import INSTRUCTIONS as QUESTIONS

    from synopsis.cli import main
    from synopsis.training.seq2seq import train_seq2seq

    sharp_t5(tokenizer).save_pretrained(tmp_path / "t5")
    tokenizer.save_pretrained(tmp_path / "t5")
    assert main(["convert", "instructsum", str(tmp_path / "t5"), str(tmp_path / "is")]) == 0
    assert main(["convert", "hibrids", str(tmp_path / "is"), str(tmp_path / "c")]) == 0
    config = instruction_run(tmp_path / "c", tmp_path, QUESTIONS, learning_rate=1e-2)
    seen: list[set[str]] = []
    original = InstructSumHibridsT5ForConditionalGeneration.forward

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN202
        seen.append({k for k, v in kwargs.items() if v is not None})
        return original(self, *args, **kwargs)

    InstructSumHibridsT5ForConditionalGeneration.forward = spy
    try:
        result = train_seq2seq(config, show_progress=False)
    finally:
        InstructSumHibridsT5ForConditionalGeneration.forward = original
    assert result.steps == 2 and seen
    assert all({"segment_ids", "section_ids", "section_relations"} <= names for names in seen[:2])
    trained = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "run" / "best")
    assert type(trained) is InstructSumHibridsT5ForConditionalGeneration
    tables = [p for n, p in trained.named_parameters() if "hibrids" in n]
    assert tables and any(bool(p.detach().abs().max() > 0) for p in tables)  # zero after conversion
