"""InstructSum through the toolkit's one input path, summarizer, CLI and trainer (Nishida et al.)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.instructsum import sharp_t5
from helpers.instructsum_path import DOCUMENT, INSTRUCTIONS, instruction_run
from helpers.tiny_models import t5_tokenizer

from synopsis.cli import main
from synopsis.config import DecodingOptions
from synopsis.document import Document, Section
from synopsis.models.inputs import INSTRUCTION_SEGMENT, SOURCE_SEGMENT, Seq2SeqInputs
from synopsis.models.instructsum import tokenize_prompt
from synopsis.models.seq2seq import convert_checkpoint, load_seq2seq
from synopsis.summarizers import load_summarizer


@pytest.fixture(scope="module")
def tokenizer(shared_data: Path):
    return t5_tokenizer(shared_data / "tokenizers")


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory, tokenizer) -> Path:
    directory = tmp_path_factory.mktemp("t5")
    sharp_t5(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def instructsum_dir(tmp_path_factory, t5_dir: Path) -> Path:
    return convert_checkpoint("instructsum", t5_dir, tmp_path_factory.mktemp("is") / "model")


def test_inputs_are_the_papers_prompt_with_segments(instructsum_dir: Path, tokenizer) -> None:
    model, _ = load_seq2seq(instructsum_dir)
    assert json.loads((instructsum_dir / "config.json").read_text())["model_type"] == "instructsum_t5"
    plain = Seq2SeqInputs(model.config, tokenizer, headings=False)
    inputs = Seq2SeqInputs(model.config, tokenizer)  # headings before their sections' text (issue 27 item 2)
    sentences = [s.text for s in DOCUMENT.sentences]
    with_headings = " ".join(["Method", *sentences[:2], "Results", *sentences[2:]])
    for builder, article in ((plain, " ".join(sentences)), (inputs, with_headings)):
        for instruction in [*INSTRUCTIONS, None]:
            (encoding,) = builder.encode_sources([DOCUMENT], [instruction])
            expected = tokenize_prompt(tokenizer, instruction, DOCUMENT.title, article)
            assert encoding.input_ids == expected.input_ids
            assert encoding.segment_ids == expected.segment_ids
            # every source sentence token knows its section; the prompt's own words belong to none
            source = [i for i, t in enumerate(encoding.segment_ids) if t == SOURCE_SEGMENT]
            assert {encoding.document_section_ids[i] for i in source} == {-1, 1, 2}
    text = plain.source_text(DOCUMENT, INSTRUCTIONS[0])
    assert text.startswith("Instructions: What is the method? According to the above instructions, summarize")
    assert "Title: A study of meetings Article: We train" in text
    assert "Title: A study of meetings Article: Method We train" in inputs.source_text(DOCUMENT)
    assert inputs.source_text(DOCUMENT).startswith("Summarize the following article. Title: A study of")


def test_each_part_is_truncated_on_its_own(instructsum_dir: Path, tokenizer) -> None:
    model, _ = load_seq2seq(instructsum_dir)
    inputs = Seq2SeqInputs(model.config, tokenizer, max_source_length=12, max_instruction_length=5)
    a, b = inputs.encode_sources([DOCUMENT, DOCUMENT], INSTRUCTIONS)
    for encoding in (a, b):
        assert encoding.segment_ids.count(INSTRUCTION_SEGMENT) == 5
        # the whole input fits max_source_length (issue 27 item 9): the source part gets 12 - 5
        assert encoding.segment_ids.count(SOURCE_SEGMENT) == 12 - 5
        assert encoding.input_ids[-1] == tokenizer.eos_token_id
    source = [[t for t, s in zip(e.input_ids, e.segment_ids, strict=True) if s == 0] for e in (a, b)]
    assert source[0] == source[1]  # the source part never depends on the instruction


def test_truncation_cuts_the_article_never_the_template(instructsum_dir: Path, tokenizer) -> None:
    """Issue 27 item 9: the instruction template was cut (its own 128-token budget) and inputs reached
    1,152 tokens; the paper reads the first 1,024 tokens of the whole input."""
    model, _ = load_seq2seq(instructsum_dir)
    inputs = Seq2SeqInputs(model.config, tokenizer)
    long_document = Document(Section(children=[Section("Method", [["We train a model. " * 40] * 60])]))
    long_instruction = "Mention the method and every detail of it, " * 20
    (encoding,) = inputs.encode_sources([long_document], [long_instruction])
    assert len(encoding.input_ids) == 1024
    parts = {
        segment: tokenizer.decode([t for t, s in zip(encoding.input_ids, encoding.segment_ids, strict=True)
                                   if s == segment], skip_special_tokens=True)
        for segment in (INSTRUCTION_SEGMENT, SOURCE_SEGMENT)
    }  # fmt: skip
    template_end = "According to the above instructions, summarize the following article."
    assert parts[INSTRUCTION_SEGMENT].endswith(template_end)
    assert parts[SOURCE_SEGMENT].startswith("Title:") or parts[SOURCE_SEGMENT].startswith("Article: Method")
    assert encoding.input_ids[-1] == tokenizer.eos_token_id


def test_plain_t5_accepts_1024_source_tokens_at_inference(t5_dir: Path, tokenizer) -> None:
    """The paper trains its T5 "Full" baseline at 512 and reads 1,024 at inference (Appendix B.1)."""
    model, _ = load_seq2seq(t5_dir)
    assert Seq2SeqInputs(model.config, tokenizer).max_source_length == 512  # the default stays 512
    assert Seq2SeqInputs(model.config, tokenizer, max_source_length=1024).max_source_length == 1024


def test_convert_instructsum_writes_the_papers_decoding(instructsum_dir: Path) -> None:
    config = json.loads((instructsum_dir / "generation_config.json").read_text())
    assert config["num_beams"] == 2 and config["max_new_tokens"] == 192


def test_a_plain_t5_given_an_instruction_reads_the_papers_prompt(t5_dir: Path, tokenizer) -> None:
    model, _ = load_seq2seq(t5_dir)
    inputs = Seq2SeqInputs(model.config, tokenizer)
    assert inputs.source_text(DOCUMENT, "Why?").startswith("Instructions: Why? According to the above")
    assert inputs.source_text(DOCUMENT).startswith("summarize: ")  # the checkpoint's own prefix otherwise
    short = DecodingOptions(max_length=8)
    summaries = load_summarizer(model=t5_dir).summarize([DOCUMENT, DOCUMENT], ["Why?", None], decoding=short)
    assert len(summaries) == 2


def test_one_source_pass_serves_many_instructions_and_equals_no_cache(instructsum_dir: Path) -> None:
    cached = load_summarizer(model=instructsum_dir)
    full = load_summarizer(model=instructsum_dir, instruction_cache=False)
    decoding = DecodingOptions(num_beams=2, max_length=10)
    encoder = cached.model.get_encoder()
    documents = [DOCUMENT] * len(INSTRUCTIONS)
    first = cached.summarize(documents, INSTRUCTIONS, decoding=decoding)
    assert (encoder.source_passes, encoder.instruction_passes, encoder.full_passes) == (1, 1, 0)
    assert first == full.summarize(documents, INSTRUCTIONS, decoding=decoding)
    assert full.model.get_encoder().full_passes == 1 and full.model.get_encoder().source_passes == 0
    # a later call with another instruction on the same document: no source pass at all
    again = cached.summarize([DOCUMENT], ["What is the method?"], decoding=decoding)
    assert encoder.source_passes == 1 and cached.cache.hits >= 1 and again == first[:1]
    # a changed document is encoded anew, never served from the cache
    changed = Document(Section(paragraphs=[["We train a small model on notes."]]), title=DOCUMENT.title)
    cached.summarize([changed], ["What is the method?"], decoding=decoding)
    assert encoder.source_passes == 2


def test_cli_one_summary_per_instruction_in_order(instructsum_dir: Path, tmp_path: Path, capsys) -> None:
    document = tmp_path / "doc.md"
    document.write_text("# Study\n\n## Method\n\nWe train a small model.\n\n## Results\n\nScores improve.\n")
    args = ["summarize", str(document), "--model", str(instructsum_dir), "--max-length", "8"]
    args += ["-i", "What is the method?", "-i", "What are the results?"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.index("| What is the method?") < out.index("| What are the results?")
    assert main([*args, "--no-cache"]) == 0
    assert capsys.readouterr().out == out


def test_convert_refuses_what_is_not_t5(tmp_path: Path, shared_data: Path, capsys) -> None:
    from helpers.tiny_models import save_tiny_bart

    bart = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    assert main(["convert", "instructsum", str(bart), str(tmp_path / "out")]) == 2
    assert "needs a T5 checkpoint" in capsys.readouterr().err


@pytest.mark.slow
def test_train_seq2seq_trains_instructsum_with_the_block_mask(instructsum_dir: Path, tmp_path: Path) -> None:
    from synopsis.training.seq2seq import train_seq2seq

    config = instruction_run(instructsum_dir, tmp_path, INSTRUCTIONS)
    seen = []
    from synopsis.models.instructsum import InstructSumT5ForConditionalGeneration

    original = InstructSumT5ForConditionalGeneration.forward

    def spy(self, *args, **kwargs):
        seen.append("segment_ids" in kwargs and kwargs["segment_ids"] is not None)
        return original(self, *args, **kwargs)

    InstructSumT5ForConditionalGeneration.forward = spy
    try:
        result = train_seq2seq(config, show_progress=False)
    finally:
        InstructSumT5ForConditionalGeneration.forward = original
    assert result.steps == 2 and seen and all(seen)
    saved = json.loads((tmp_path / "run" / "best" / "config.json").read_text())
    assert saved["model_type"] == "instructsum_t5"
    assert torch.isfinite(torch.tensor(result.history["train_loss"][0][1]))


def test_repeated_instructions_work_for_centrality_too(tmp_path: Path, capsys) -> None:
    document = tmp_path / "doc.txt"
    document.write_text(
        "The council met on Monday. The budget was approved after a long debate. "
        "Parking fees will rise next year. A new library opens in May."
    )
    args = ["summarize", str(document), "--method", "centrality", "--k", "1"]
    assert main([*args, "-i", "What about the budget?", "-i", "When does the library open?"]) == 0
    out = capsys.readouterr().out
    blocks = out.split("== ")[1:]
    assert [b.splitlines()[0].split(" | ")[1] for b in blocks] == [
        "What about the budget?",
        "When does the library open?",
    ]
    assert "budget" in blocks[0] and "library" in blocks[1]


def test_the_service_reuses_the_source_cache_across_requests(instructsum_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, build_registry, create_app

    registry = build_registry({"instructsum": instructsum_dir}, builtin=False, warm_up=False)
    encoder = registry.get("instructsum").summarizer.model.get_encoder()
    document = "# Study\n\n## Method\n\nWe train a small model.\n\n## Results\n\nScores improve."
    with TestClient(create_app(registry, ServeSettings())) as client:
        body = {"document": document, "model": "instructsum", "instructions": ["Method?", "Results?"]}
        first = client.post("/v1/summarize", json=body)
        assert first.status_code == 200, first.json()
        assert len(first.json()["timing_ms"]["summaries"]) == 2
        assert encoder.source_passes == 1  # the second instruction reused the first one's source pass
        again = client.post("/v1/summarize", json={**body, "options": {"num_beams": 2, "max_length": 6}})
        assert again.status_code == 200, again.json()
        assert encoder.source_passes == 1  # other options, same document: still no source pass


def test_by_section_encodes_each_window_once_for_all_instructions(instructsum_dir: Path, caplog) -> None:
    from helpers.documents import long_document

    from synopsis.summarizers.windows import plan_windows

    options = {"model": instructsum_dir, "max_source_length": 200}
    decoding = DecodingOptions(num_beams=2, max_length=10)
    cached = load_summarizer(**options)
    full = load_summarizer(**options, instruction_cache=False)
    document = long_document()
    windows, _ = plan_windows(document, cached.input_capacity(), cached.input_length)
    assert len(windows) > 2
    with caplog.at_level("WARNING", logger="synopsis.models.inputs"):
        # each instruction per section: the document once per instruction; batches of 4 split them apart
        results = cached.summarize_by_section(
            [document] * len(INSTRUCTIONS), INSTRUCTIONS, batch_size=4, decoding=decoding
        )
    encoder = cached.model.get_encoder()
    assert encoder.source_passes == len(windows) and encoder.full_passes == 0
    assert not [r for r in caplog.records if "truncated" in r.message]  # every window read whole
    expected = full.summarize_by_section(
        [document] * len(INSTRUCTIONS), INSTRUCTIONS, batch_size=4, decoding=decoding
    )
    assert [r.to_dict() for r in results] == [r.to_dict() for r in expected]
    assert full.model.get_encoder().full_passes > 0


def test_summarizer_and_experiment_encode_through_the_one_cached_path(
    instructsum_dir: Path, tokenizer, monkeypatch
) -> None:
    """Issue 25 item 3: the summarizer and the QMSum experiment both encode with SourceCache.encode_prompts,
    and no instruction pass runs outside it (the cached generation used to exist in three copies)."""
    from synopsis.experiments.instructsum_qmsum import InstructSumExperimentConfig, _cached_run
    from synopsis.models.instructsum import SourceCache
    from synopsis.models.instructsum import cache as cache_module

    inside: list[bool] = []  # per instruction pass: was it run from encode_prompts?
    callers: list[int] = []  # prompts per encode_prompts call
    one_path = SourceCache.encode_prompts
    instruction_pass = cache_module.encode_with_instruction
    depth = [0]

    def spy_path(self, model, prompts):
        callers.append(len(prompts))
        depth[0] += 1
        try:
            return one_path(self, model, prompts)
        finally:
            depth[0] -= 1

    def spy_pass(*args, **kwargs):
        inside.append(depth[0] > 0)
        return instruction_pass(*args, **kwargs)

    monkeypatch.setattr(SourceCache, "encode_prompts", spy_path)
    monkeypatch.setattr(cache_module, "encode_with_instruction", spy_pass)
    summarizer = load_summarizer(model=instructsum_dir)
    short = DecodingOptions(max_length=6)
    summaries = summarizer.summarize([DOCUMENT] * len(INSTRUCTIONS), INSTRUCTIONS, decoding=short)
    assert callers == [len(INSTRUCTIONS)] and inside == [True]
    callers.clear()
    inside.clear()
    sources = summarizer.inputs.encode_sources([DOCUMENT] * len(INSTRUCTIONS), INSTRUCTIONS)
    cfg = InstructSumExperimentConfig(eval_batch_size=2, eval_max_length=6)
    run = _cached_run(summarizer.model, tokenizer, sources, cfg)
    # one timed call per example, then one per generation batch; every instruction pass inside the path
    assert callers == [1, 1, 2] and inside == [True] * 3
    assert run["distinct_sources"] == 1 and run["max_encoder_diff"] < 1e-4
    assert len(run["predictions"]) == len(summaries)


def test_a_length_the_caller_sets_wins_over_the_checkpoints_max_new_tokens(
    instructsum_dir: Path, tmp_path: Path, capsys, tokenizer
) -> None:
    """Before: converting wrote the paper's max_new_tokens 192, which outranked --max-length 8 (CLI, API)."""
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, build_registry, create_app

    document = tmp_path / "doc.txt"
    document.write_text("We train a small model on notes. Scores improve on every benchmark we tried.")
    args = [
        "summarize",
        str(document),
        "--model",
        str(instructsum_dir),
        "--num-beams",
        "1",
        "--by",
        "document",
    ]
    assert main([*args, "--max-length", "8", "-i", "What is the method?"]) == 0
    written = capsys.readouterr().out.strip()
    ids = tokenizer(written, add_special_tokens=False)["input_ids"]
    if tokenizer.convert_ids_to_tokens(ids[:1]) == ["▁"]:  # re-read, a first piece without ▁ gets one
        ids = ids[1:]
    assert 0 < len(ids) <= 8, written  # --max-length 8: at most 8 summary tokens (issue 51 item 6)
    registry = build_registry({"instructsum": instructsum_dir}, builtin=False, warm_up=False)
    with TestClient(create_app(registry, ServeSettings())) as client:
        body = {"document": document.read_text(), "model": "instructsum", "options": {"num_beams": 1,
                "max_length": 8}, "instructions": ["What is the method?"]}  # fmt: skip
        answer = client.post("/v1/summarize", json=body)
        assert answer.status_code == 200, answer.json()
    assert answer.json()["summaries"][0]["summary"] == written


def test_lengths_map_to_generate_once() -> None:
    from synopsis.models.lengths import generate_kwargs

    assert generate_kwargs(DecodingOptions(num_beams=2)) == {"num_beams": 2}  # the checkpoint's lengths stay
    given = generate_kwargs(DecodingOptions(min_length=3, max_length=8))  # + the decoder start token
    assert given == {"min_length": 4, "max_length": 9, "min_new_tokens": None, "max_new_tokens": None}
