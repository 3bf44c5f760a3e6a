"""The seq2seq path: loading local checkpoints, building inputs, summarizing, training, resuming, the CLI."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from helpers.tiny_models import bart_tokenizer, save_tiny_bart, save_tiny_led, save_tiny_t5
from safetensors.torch import load_file

from synopsis.checkpoint import CheckpointManager
from synopsis.cli import main
from synopsis.config import DecodingOptions
from synopsis.data.example import Example, write_examples
from synopsis.document import Document
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.models.hie_bart import HieBartConfig, HieBartForConditionalGeneration
from synopsis.models.inputs import Seq2SeqInputs, model_max_source_length
from synopsis.models.seq2seq import convert_checkpoint, load_seq2seq
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.seq2seq import Seq2SeqSummarizer
from synopsis.training.seq2seq import Seq2SeqTrainConfig, Seq2SeqTrainer, train_seq2seq

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="session")
def tokenizers_dir(shared_data: Path) -> Path:
    return shared_data / "tokenizers"


@pytest.fixture(scope="session")
def bart_dir(tmp_path_factory, tokenizers_dir: Path) -> Path:
    return save_tiny_bart(tmp_path_factory.mktemp("bart"), tokenizers_dir)


@pytest.fixture(scope="session")
def t5_dir(tmp_path_factory, tokenizers_dir: Path) -> Path:
    return save_tiny_t5(tmp_path_factory.mktemp("t5"), tokenizers_dir)


@pytest.fixture(scope="session")
def led_dir(tmp_path_factory, tokenizers_dir: Path) -> Path:
    return save_tiny_led(tmp_path_factory.mktemp("led"), tokenizers_dir)


@pytest.fixture(scope="session")
def bart(bart_dir: Path):
    """(model, tokenizer), loaded once for the tests that only read them."""
    return load_seq2seq(bart_dir)


@pytest.fixture(scope="session")
def t5(t5_dir: Path):
    return load_seq2seq(t5_dir)


@pytest.fixture(scope="session")
def led(led_dir: Path):
    return load_seq2seq(led_dir)


@pytest.fixture(scope="session")
def scitldr_examples(shared_data: Path) -> list[Example]:
    from synopsis.data.readers import read_corpus

    examples = []
    for example in read_corpus("scitldr", shared_data / "scitldr", split="train"):
        examples.append(example)
        if len(examples) == 12:
            return examples
    return examples


@pytest.fixture()
def corpus_file(tmp_path: Path, scitldr_examples: list[Example]) -> Path:
    path = tmp_path / "train.jsonl"
    write_examples(scitldr_examples, path)
    return path


# ---------------------------------------------------------------------------- loading
def test_real_tokenizers_are_not_empty(tokenizers_dir: Path, t5) -> None:
    assert len(bart_tokenizer(tokenizers_dir)) == 50262
    _, t5_tok = t5
    assert len(t5_tok) == 32100
    assert t5_tok.convert_ids_to_tokens(t5_tok("summarize: the cat")["input_ids"]) == [
        "▁summarize",
        ":",
        "▁the",
        "▁cat",
        "</s>",
    ]


@pytest.mark.parametrize("fixture", ["bart_dir", "t5_dir", "led_dir"])
def test_load_checkpoint_and_tokenizer(fixture: str, request) -> None:
    model, tokenizer = load_seq2seq(request.getfixturevalue(fixture))
    assert model.get_input_embeddings().num_embeddings >= len(tokenizer) > 30000


def test_missing_directory_config_or_weights_are_clear_errors(tmp_path: Path, bart_dir: Path) -> None:
    with pytest.raises(CheckpointError, match="no such model directory"):
        load_seq2seq(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no config.json"):
        load_seq2seq(tmp_path)
    no_weights = tmp_path / "no_weights"
    shutil.copytree(bart_dir, no_weights)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no model weights"):
        load_seq2seq(no_weights)
    model, _ = load_seq2seq(no_weights, random_init=True)  # what tests and the sweep use
    assert model.config.d_model == 32


def test_corrupt_files_and_other_architectures_are_refused(tmp_path: Path, bart_dir: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(bart_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="cannot load the model weights"):
        load_seq2seq(broken)
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="corrupt JSON"):
        load_seq2seq(broken)
    (broken / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CheckpointError, match="model_type 'bert' is not a supported"):
        load_seq2seq(broken)


def test_nan_or_inf_weights_are_refused_on_every_load(tmp_path: Path, bart_dir: Path) -> None:
    """load_seq2seq (the one loader of trainers, summarizers and experiments) checks the weights it read."""
    from safetensors.torch import save_file

    for bad in (float("nan"), float("inf")):
        corrupt = tmp_path / f"corrupt-{bad}"
        shutil.copytree(bart_dir, corrupt)
        weights = load_file(corrupt / "model.safetensors")
        name = next(n for n, t in weights.items() if t.is_floating_point())
        weights[name].view(-1)[0] = bad
        save_file(weights, corrupt / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(CheckpointError, match=f"'{name}' holds NaN or infinite values"):
            load_seq2seq(corrupt)
    model, _ = load_seq2seq(corrupt, random_init=True)  # the stored weights are not read
    assert all(bool(torch.isfinite(t).all()) for t in model.state_dict().values())


def test_no_tokenizer_is_a_clear_error(tmp_path: Path, bart_dir: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bart_dir / name, bare)
    with pytest.raises(CheckpointError, match="no tokenizer files"):
        load_seq2seq(bare)
    (bare / "vocab.json").write_text(
        "{}"
    )  # v4-style leftovers: transformers 5 would build an empty tokenizer
    (bare / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(CheckpointError, match="tokenizer is empty"):
        load_seq2seq(bare)


def test_hie_bart_needs_bart_and_a_valid_head_count(t5_dir: Path, bart_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="needs a BART checkpoint, this one is 't5'"):
        convert_checkpoint("hie-bart", t5_dir, tmp_path / "a", word_heads=2)
    for bad in (0, 5):
        with pytest.raises(ConfigError, match=r"must be in 1\.\.4"):
            convert_checkpoint("hie-bart", bart_dir, tmp_path / "b", word_heads=bad)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(ConfigError, match="must differ from the input"):
        convert_checkpoint("hie-bart", bart_dir, bart_dir, word_heads=2)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(ConfigError, match="not empty"):
        convert_checkpoint("hie-bart", bart_dir, tmp_path / "full", word_heads=2)
    assert (tmp_path / "full" / "x").read_text() == "keep me"


@pytest.fixture(scope="session")
def hie_bart_dir(tmp_path_factory, bart_dir: Path) -> Path:
    """The tiny BART converted to Hie-BART with 2 word and 2 sentence heads, with the new-token marker option
    (the default, BART's <s>, is tested in test_paper_recipes.py)."""
    out = tmp_path_factory.mktemp("conv") / "hie"
    return convert_checkpoint("hie-bart", bart_dir, out, word_heads=2, sentence_start_token="<sent>")


def test_converted_checkpoint_says_what_it_is(hie_bart_dir: Path) -> None:
    config = json.loads((hie_bart_dir / "config.json").read_text())
    assert config["model_type"] == "hie_bart" and config["word_heads"] == 2
    model, tokenizer = load_seq2seq(hie_bart_dir)  # no flag: the config alone decides
    assert isinstance(model, HieBartForConditionalGeneration) and model.config.word_heads == 2
    marker_id = tokenizer.convert_tokens_to_ids("<sent>")
    assert model.config.sentence_start_token_id == marker_id == len(tokenizer) - 1
    assert model.get_input_embeddings().num_embeddings == len(tokenizer)


def test_all_word_heads_summarize_as_bart_and_a_2_2_split_differently(
    tokenizers_dir: Path, tmp_path: Path
) -> None:
    documents = [
        Document.from_text("The cat sat on the mat. It purred loudly. Then it slept."),
        Document.from_text("Dogs bark at night. Neighbours complain. The council meets."),
    ]

    def summaries(model_dir: Path) -> list[str]:
        decoding = DecodingOptions(num_beams=2, max_length=10)
        return Seq2SeqSummarizer.from_pretrained(model_dir).summarize(documents, decoding=decoding)

    # a BART whose outputs depend on the input (with the default init, any input gives the same output)
    bart_dir = save_tiny_bart(tmp_path / "bart", tokenizers_dir, init_std=0.3)
    all_heads = convert_checkpoint("hie-bart", bart_dir, tmp_path / "h4", word_heads=4)
    split = convert_checkpoint("hie-bart", bart_dir, tmp_path / "h2", word_heads=2)
    assert summaries(all_heads) == summaries(bart_dir)
    assert summaries(split) != summaries(bart_dir)


# ---------------------------------------------------------------------------- inputs
def test_hie_bart_inputs_mark_every_sentence(hie_bart_dir: Path, scitldr_examples: list[Example]) -> None:
    model, tokenizer = load_seq2seq(hie_bart_dir)
    inputs = Seq2SeqInputs(model.config, tokenizer)
    documents = [e.document for e in scitldr_examples[:4]]
    ids = [e.input_ids for e in inputs.encode_sources(documents)]
    marker = model.config.sentence_start_token_id
    for document, row in zip(documents, ids, strict=True):
        assert row.count(marker) == len(document.sentences)
        assert row[0] == tokenizer.bos_token_id and row[1] == marker and row[-1] == tokenizer.eos_token_id
    # the marker does not change how the sentence itself is tokenized
    plain = tokenizer(documents[0].sentences[0].text, add_special_tokens=False)["input_ids"]
    first = ids[0][2 : ids[0].index(marker, 2)]
    assert tokenizer.decode(first).strip() == tokenizer.decode(plain).strip()


def test_t5_prefix_and_truncation_warning_with_counts(t5, caplog) -> None:
    model, tokenizer = t5
    inputs = Seq2SeqInputs(model.config, tokenizer, max_source_length=16)
    assert inputs.prefix == "summarize: "
    long_doc = Document.from_text("The cat sat on the mat. " * 10)
    short_doc = Document.from_text("A dog.")
    with caplog.at_level(logging.WARNING):
        ids = [e.input_ids for e in inputs.encode_sources([long_doc, short_doc])]
    full = len(tokenizer("summarize: " + " ".join(s.text for s in long_doc.sentences))["input_ids"])
    assert len(ids[0]) == 16 and ids[0][-1] == tokenizer.eos_token_id
    assert (
        f"truncated 1 of 2 inputs to 16 tokens ({full - 16} tokens cut; the longest had {full})"
        in caplog.text
    )
    assert tokenizer.decode(ids[1], skip_special_tokens=True) == "summarize: A dog."


def test_max_source_length_beyond_the_model_is_refused(bart) -> None:
    model, tokenizer = bart
    assert model_max_source_length(model.config, tokenizer) == 512
    with pytest.raises(ConfigError, match=r"must be in 1\.\.512 \(the model's maximum\), got 513"):
        Seq2SeqInputs(model.config, tokenizer, max_source_length=513)


def test_led_gets_global_attention_on_the_first_token_and_labels_mask_padding(led) -> None:
    model, tokenizer = led
    inputs = Seq2SeqInputs(model.config, tokenizer, max_target_length=8)
    documents = [Document.from_text("One sentence here. And another."), Document.from_text("Short.")]
    batch = inputs.collate(inputs.encode_sources(documents), inputs.encode_targets(["a b c", "a"]))
    assert batch["global_attention_mask"][:, 0].tolist() == [1, 1]
    assert batch["global_attention_mask"][:, 1:].sum() == 0
    assert (batch["labels"][1] == -100).sum() == (batch["labels"][0] != -100).sum() - (
        batch["labels"][1] != -100
    ).sum()
    assert model(**inputs.model_inputs(batch)).loss.isfinite()


def test_instructions_and_empty_documents(bart) -> None:
    model, tokenizer = bart
    inputs = Seq2SeqInputs(model.config, tokenizer)
    text = inputs.source_text(Document.from_text("Body."), "Focus on X.")
    assert text == "Focus on X.\nBody."
    with pytest.raises(InputError, match="no text to summarize"):
        inputs.encode_sources([Document()])
    with pytest.raises(InputError, match="2 instructions for 1 documents"):
        inputs.encode_sources([Document.from_text("Body.")], ["a", "b"])


# ---------------------------------------------------------------------------- summarizer
@pytest.mark.parametrize("fixture", ["bart", "t5", "led"])
def test_summarizer_batches_and_honours_max_length(fixture: str, request) -> None:
    model, tokenizer = request.getfixturevalue(fixture)
    documents = [Document.from_text("The cat sat on the mat. It purred."), Document.from_text("Dogs bark.")]
    summarizer = Seq2SeqSummarizer.from_model(model, tokenizer)
    short = summarizer.summarize(documents, decoding=DecodingOptions(num_beams=1, min_length=5, max_length=6))
    long = summarizer.summarize(documents, decoding=DecodingOptions(num_beams=1, min_length=5, max_length=14))
    assert len(short) == len(long) == 2
    for a, b in zip(short, long, strict=True):  # greedy decoding: the shorter output is a prefix
        assert a and b.startswith(a) and len(b) > len(a)


def test_generation_options_reach_generate(bart, monkeypatch) -> None:
    summarizer = Seq2SeqSummarizer.from_model(*bart)
    options = dict(num_beams=3, min_length=2, max_length=9, length_penalty=0.5, no_repeat_ngram_size=2)
    seen = {}

    def fake_generate(**kwargs):
        seen.update(kwargs)
        return torch.tensor([[summarizer.tokenizer.eos_token_id]])

    monkeypatch.setattr(summarizer.model, "generate", fake_generate)
    assert summarizer.summarize([Document.from_text("A b.")], decoding=DecodingOptions(**options)) == [""]
    expected = {  # Hugging Face counts the decoder start token in both lengths
        "num_beams": 3,
        "min_length": 3,
        "max_length": 10,
        "length_penalty": 0.5,
        "no_repeat_ngram_size": 2,
    }
    assert expected.items() <= seen.items() and "attention_mask" in seen


def _summary_token_counts(summarizer: Seq2SeqSummarizer, documents: list, patch, **decoding) -> list[int]:
    """Tokens of each summary ``generate()`` made with ``decoding``: after the decoder start token, without
    EOS and padding."""
    produced = []
    original = summarizer.model.generate

    def recording(**kwargs):  # noqa: ANN003, ANN202
        produced.append(original(**kwargs))
        return produced[-1]

    patch.setattr(summarizer.model, "generate", recording)
    summarizer.summarize(documents, decoding=DecodingOptions(**decoding))
    ends = torch.tensor([summarizer.tokenizer.eos_token_id, summarizer.tokenizer.pad_token_id])
    return [int((~torch.isin(row[1:], ends)).sum()) for output in produced for row in output]


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_a_length_means_summary_tokens(family: str, request, monkeypatch) -> None:
    """Issue 51 item 6: Hugging Face counts the decoder start token in ``max_length`` / ``min_length``, so
    ``--max-length 6`` gave at most 5 summary tokens and ``--min-length 4`` at least 3. A checkpoint that
    never ends early (EOS suppressed) gives exactly the maximum; one that would end at once, the minimum."""
    documents = [Document.from_text("The cat sat on the mat. It purred."), Document.from_text("Dogs bark.")]
    model, tokenizer = load_seq2seq(request.getfixturevalue(f"{family}_dir"))
    eos = tokenizer.eos_token_id
    # BART forces EOS as the last token a maximum allows: that slot would not be a summary token
    model.generation_config.update(forced_eos_token_id=None, suppress_tokens=[eos])
    summarizer = Seq2SeqSummarizer.from_model(model, tokenizer)
    assert _summary_token_counts(summarizer, documents, monkeypatch, num_beams=1, max_length=6) == [6, 6]
    monkeypatch.undo()
    model.generation_config.suppress_tokens = None
    model.generation_config.sequence_bias = {(eos,): 100.0}  # EOS first, unless the minimum forbids it
    assert _summary_token_counts(summarizer, documents, monkeypatch, num_beams=1) == [0, 0]
    monkeypatch.undo()
    brief = {"num_beams": 2, "min_length": 4, "max_length": 9}
    assert _summary_token_counts(summarizer, documents, monkeypatch, **brief) == [4, 4]


@pytest.mark.parametrize("family", ["bart", "t5"])
@pytest.mark.parametrize("checkpoint_max", [{"max_new_tokens": 5}, {"max_length": 6}])
def test_a_minimum_above_the_checkpoints_maximum_raises_it(
    family: str, checkpoint_max: dict, request, monkeypatch
) -> None:
    """Issue 51 item 6: ``--min-length 200`` alone was capped at 192 by an InstructSum checkpoint's
    ``max_new_tokens``; a user's minimum above the checkpoint's maximum (5 summary tokens either way) now
    raises that maximum to it. A maximum the user sets is kept (and checked against the minimum)."""
    documents = [Document.from_text("The cat sat on the mat. It purred.")]
    model, tokenizer = load_seq2seq(request.getfixturevalue(f"{family}_dir"))
    eos = tokenizer.eos_token_id
    model.generation_config.update(forced_eos_token_id=None, suppress_tokens=[eos], **checkpoint_max)
    summarizer = Seq2SeqSummarizer.from_model(model, tokenizer)
    assert _summary_token_counts(summarizer, documents, monkeypatch, num_beams=1) == [5]
    monkeypatch.undo()
    assert _summary_token_counts(summarizer, documents, monkeypatch, num_beams=1, min_length=8) == [8]
    monkeypatch.undo()
    # within the checkpoint's maximum
    assert _summary_token_counts(summarizer, documents, monkeypatch, num_beams=1, min_length=3) == [5]


def test_hie_bart_summarizer_from_a_converted_checkpoint(hie_bart_dir: Path, scitldr_examples) -> None:
    summarizer = Seq2SeqSummarizer.from_pretrained(hie_bart_dir)
    assert isinstance(summarizer.model.config, HieBartConfig)
    documents = [e.document for e in scitldr_examples[:3]]
    assert len(summarizer.summarize(documents, decoding=DecodingOptions(max_length=8))) == 3


def test_generation_options_are_checked(bart) -> None:
    with pytest.raises(ConfigError, match="unknown generation option"):
        DecodingOptions.from_mapping({"temperature": 0.5})
    with pytest.raises(ConfigError, match="--min-length 9 is larger than --max-length 4"):
        DecodingOptions(min_length=9, max_length=4)
    with pytest.raises(ConfigError, match="--num-beams must be >= 1"):
        DecodingOptions(num_beams=0)
    with pytest.raises(ConfigError, match="'num_beams' is a decoding option: give it per call"):
        load_summarizer("lead-3", num_beams=2)


# ---------------------------------------------------------------------------- training
def train_config(model: Path, data: Path, out: Path, **overrides: object) -> Seq2SeqTrainConfig:
    settings = dict(
        model=str(model),
        output_dir=str(out),
        train_path=str(data),
        max_dev_examples=4,
        max_source_length=64,
        max_target_length=16,
        batch_size=4,
        learning_rate=1e-3,
        max_steps=4,
        eval_every=2,
        eval_max_length=8,
        patience=0,
    )
    return Seq2SeqTrainConfig(**{**settings, **overrides})


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


@pytest.mark.slow
def test_training_writes_best_and_checkpoints_and_resume_is_exact(
    bart_dir: Path, corpus_file: Path, tmp_path: Path
) -> None:
    full = train_seq2seq(
        train_config(bart_dir, corpus_file, tmp_path / "full", grad_accum_steps=2), show_progress=False
    )
    assert full.steps == 4 and len(full.history["dev"]) == 2
    assert full.history["train_loss"][-1][1] < full.history["train_loss"][0][1] + 1.0
    run = tmp_path / "full"
    assert (run / "best" / "model.safetensors").is_file() and (run / "curves.png").is_file()
    latest = run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()
    assert latest.name == "step-00000004" and (latest / "optimizer.safetensors").is_file()
    assert Seq2SeqSummarizer.from_pretrained(run / "best").summarize(
        [Document.from_text("A b.")], decoding=DecodingOptions(max_length=8)
    )

    # the same run, interrupted after step 2 (as by a kill) and resumed, ends with the same weights
    config = train_config(bart_dir, corpus_file, tmp_path / "part", grad_accum_steps=2)
    Seq2SeqTrainer(config, show_progress=False).train(stop_at_step=2)
    with pytest.raises(CheckpointError, match="pass --resume"):
        Seq2SeqTrainer(config, show_progress=False)
    result = train_seq2seq(config, resume=True, show_progress=False)
    assert result.steps == 4
    a, b = weights(latest), weights(tmp_path / "part" / "checkpoints" / "step-00000004")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6


def test_dev_predictions_read_eval_max_length_as_summary_tokens(
    bart_dir: Path, corpus_file: Path, tmp_path: Path, monkeypatch
) -> None:
    """Issue 51 item 6: ``eval_max_length`` 5 gave 4 summary tokens (Hugging Face counts the decoder start
    token), and a checkpoint's ``max_new_tokens`` (InstructSum's 192) outranked it."""
    trainer = Seq2SeqTrainer(train_config(bart_dir, corpus_file, tmp_path / "run", eval_max_length=5))
    model = trainer.distributed.unwrap(trainer.model)
    eos = trainer.tokenizer.eos_token_id
    model.generation_config.update(forced_eos_token_id=None, suppress_tokens=[eos], max_new_tokens=3)
    trainer.config.eval_num_beams = 1
    produced = []
    original = model.generate

    def recording(**kwargs):  # noqa: ANN003, ANN202
        produced.append(original(**kwargs))
        return produced[-1]

    monkeypatch.setattr(model, "generate", recording)
    trainer.predict(trainer.inputs.encode_sources([Document.from_text("The cat sat on the mat.")]))
    (output,) = produced
    assert output.shape[1] == 1 + 5  # the decoder start token, then five summary tokens


@pytest.mark.slow
def test_resuming_from_a_checkpoint_with_nan_weights_is_refused(
    bart_dir: Path, corpus_file: Path, tmp_path: Path
) -> None:
    """Before, the trainer loaded a checkpoint through Hugging Face alone and trained on from NaN weights."""
    from safetensors.torch import save_file

    config = train_config(bart_dir, corpus_file, tmp_path / "run")
    Seq2SeqTrainer(config, show_progress=False).train(stop_at_step=2)
    latest = CheckpointManager(tmp_path / "run").latest()
    assert latest is not None
    state = weights(latest)
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    save_file(state, str(latest / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        Seq2SeqTrainer(config, resume=True, show_progress=False)


@pytest.mark.slow
def test_early_stopping_and_hie_bart_training(bart_dir: Path, corpus_file: Path, tmp_path: Path) -> None:
    config = train_config(
        bart_dir,
        corpus_file,
        tmp_path / "hie",
        convert={"method": "hie-bart", "word_heads": 2, "sentence_start_token": "<sent>"},
        learning_rate=1e-9,
        eval_every=1,
        patience=1,
    )
    result = train_seq2seq(config, show_progress=False)
    assert result.stopped_early and result.steps < 4  # a learning rate of 1e-9 cannot improve dev ROUGE
    saved = json.loads((tmp_path / "hie" / "best" / "config.json").read_text())
    assert saved["model_type"] == "hie_bart" and saved["word_heads"] == 2
    tokenizer_config = (tmp_path / "hie" / "best" / "tokenizer.json").read_text()
    assert "<sent>" in tokenizer_config


# ---------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_cli_train_summarize_evaluate_end_to_end(
    bart_dir: Path, corpus_file: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    code = main(
        [
            "train", "seq2seq", "--model", str(bart_dir), "--train", str(corpus_file), "--output", str(run),
            "--set", "convert={method: hie-bart, word_heads: 2}", "--max-steps", "2", "--eval-every", "2",
            "--batch-size", "4",
            "--set", "max_dev_examples=3", "--set", "max_source_length=64", "--set", "eval_max_length=8",
        ]
    )  # fmt: skip
    assert code == 0
    assert json.loads((run / "best" / "config.json").read_text())["model_type"] == "hie_bart"
    predictions = tmp_path / "pred.jsonl"
    code = main(
        [
            "summarize", str(corpus_file), "--corpus", "synopsis", "--model", str(run / "best"),
            "--max-length", "8", "--num-beams", "2", "--output", str(predictions),
        ]
    )  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 12 and all("prediction" in r for r in rows)
    report = tmp_path / "report.json"
    code = main(
        [
            "evaluate", "-p", str(predictions), "-r", str(corpus_file), "--metrics", "rouge",
            "--bootstrap", "0", "--json", str(report),
        ]
    )  # fmt: skip
    assert code == 0 and report.is_file()


def test_cli_errors_are_one_line(t5_dir: Path, bart_dir: Path, tmp_path: Path, capsys) -> None:
    document = tmp_path / "doc.txt"
    document.write_text("The cat sat. It purred.")
    assert main(["convert", "hie-bart", str(t5_dir), str(tmp_path / "h"), "--word-heads", "2"]) == 2
    assert "needs a BART checkpoint" in capsys.readouterr().err
    assert main(["train", "seq2seq", "--model", str(bart_dir), "--set", "lerning_rate=1e-3"]) == 2
    assert "unknown key 'lerning_rate'; did you mean 'learning_rate'?" in capsys.readouterr().err
    assert main(["summarize", str(document), "--model", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert main(["train", "seq2seq", "--model", str(bart_dir), "--output", str(tmp_path / "r")]) == 2
    assert "missing required key 'train_path'" in capsys.readouterr().err


def test_single_sentence_document_runs_as_one_sentence(hie_bart_dir: Path) -> None:
    summarizer = Seq2SeqSummarizer.from_pretrained(hie_bart_dir)
    document = Document.from_text("no punctuation and no sentence boundary at all")
    ids = summarizer.inputs.encode_sources([document])[0].input_ids
    assert ids.count(summarizer.model.config.sentence_start_token_id) == 1
    assert len(summarizer.summarize([document], decoding=DecodingOptions(max_length=6))) == 1


@pytest.mark.parametrize("path", [*sorted(CONFIGS.glob("seq2seq_*.yaml")), CONFIGS / "hie_bart_cnndm.yaml"])
def test_shipped_training_configs_are_valid(path: Path) -> None:
    from synopsis.config import load_config

    config = load_config(Seq2SeqTrainConfig, path, {"model": "m", "output_dir": "o", "train_path": "t"})
    assert config.max_steps > 0


def test_shipped_sweep_config_is_valid() -> None:
    from synopsis.config import load_config
    from synopsis.experiments.hie_bart_heads import HeadSweepConfig

    config = load_config(HeadSweepConfig, CONFIGS / "hie_bart_heads.yaml")
    assert config.heads == 8 and config.ratios[0] == "8:0"
    with pytest.raises(ValueError, match="same number of heads"):
        HeadSweepConfig(ratios=["8:0", "4:2"])
    with pytest.raises(ValueError, match="word >= 1"):
        HeadSweepConfig(ratios=["0:8"])


@pytest.mark.slow
def test_head_sweep_cli_writes_table_json_and_png(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    code = main(
        [
            "experiment", "hie-bart-heads", "--data", str(shared_data), "-o", str(out), "--ratios", "2:0,1:1",
            "--max-steps", "2", "--threads", "1", "--set", "eval_every=2", "--set", "train_examples=16",
            "--set", "dev_examples=3", "--set", "d_model=16", "--set", "ffn_dim=32",
            "--set", "vocab_size=400", "--set", "max_source_length=96", "--set", "eval_max_length=8",
        ]
    )  # fmt: skip
    assert code == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["word_heads"], r["sentence_heads"]) for r in rows] == [(2, 0), (1, 1)]
    table = (out / "table.md").read_text()
    assert "| 1:1 |" in table and "dev loss" in table and "do NOT reproduce" in table
    assert all(r["dev_loss"] > 0 for r in rows) and (out / "heads.png").stat().st_size > 1000
