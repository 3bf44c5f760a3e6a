"""The recipes around the models do what the papers did: converters keep the source's decoding settings,
the seq2seq trainer has label smoothing, Hie-BART's sentence marker is BART's own <s>."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.data import missing_shared_data
from helpers.tiny_models import save_tiny_bart, save_tiny_t5
from transformers import GenerationConfig

from synopsis.models.seq2seq import convert_checkpoint, load_seq2seq

# BART-large-CNN's decoding (the Hie-BART paper's fairseq test command: beam 4, lenpen 2.0, ...)
PAPER_DECODING = {
    "num_beams": 4,
    "length_penalty": 2.0,
    "min_length": 56,
    "max_length": 142,
    "no_repeat_ngram_size": 3,
    "early_stopping": True,
}


@pytest.fixture(scope="module")
def tokenizers_dir(shared_data: Path) -> Path:
    return shared_data / "tokenizers"


def _with_decoding(directory: Path) -> Path:
    model_config = json.loads((directory / "config.json").read_text())
    ids = {k: model_config.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    ids["decoder_start_token_id"] = model_config.get("decoder_start_token_id")
    GenerationConfig(**PAPER_DECODING, **{k: v for k, v in ids.items() if v is not None}).save_pretrained(
        directory
    )
    return directory


@pytest.fixture(scope="module")
def sources(tmp_path_factory, tokenizers_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    return {
        "bart": _with_decoding(save_tiny_bart(root / "bart", tokenizers_dir)),
        "t5": _with_decoding(save_tiny_t5(root / "t5", tokenizers_dir)),
    }


@pytest.mark.parametrize(
    ("kind", "base", "options"),
    [
        ("hie-bart", "bart", {"word_heads": 2}),
        ("hie-bart", "bart", {"word_heads": 4}),
        ("instructsum", "t5", {}),
        ("hibrids", "bart", {}),
        ("hibrids", "t5", {}),
        ("section-tokens", "bart", {"markers": "sectok"}),
    ],
)
def test_every_converter_keeps_the_source_decoding_settings(
    kind: str, base: str, options: dict, sources: dict[str, Path], tmp_path: Path
) -> None:
    from synopsis.models.seq2seq import METHOD_DECODING

    out = convert_checkpoint(kind, sources[base], tmp_path / "converted", **options)
    model, _ = load_seq2seq(out)
    # the source's settings, except what the method's own paper prescribes (InstructSum: beam 2, 192 tokens)
    expected = {**PAPER_DECODING, **METHOD_DECODING.get(kind, {})}
    kept = {name: getattr(model.generation_config, name) for name in expected}
    assert kept == expected


# ---------------------------------------------------------------------------- label smoothing, decoding
def test_label_smoothed_nll_is_fairseqs_and_zero_is_plain_cross_entropy() -> None:
    import torch
    from torch.nn import functional as F

    from synopsis.training.objectives import label_smoothed_nll

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[1, 2, 3, -100, -100], [6, 0, 5, 4, 2]])
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert torch.allclose(label_smoothed_nll(logits, labels, 0.0), plain)
    # the target gets 1 - eps, every other word eps / (V - 1): cross-entropy against that distribution
    eps, vocab = 0.1, logits.size(-1)
    total, count = 0.0, 0
    for row in range(2):
        for t in range(5):
            if labels[row, t] < 0:
                continue
            q = torch.full((vocab,), eps / (vocab - 1))
            q[labels[row, t]] = 1 - eps
            total += float(-(q * torch.log_softmax(logits[row, t], -1)).sum())
            count += 1
    assert abs(float(label_smoothed_nll(logits, labels, eps)) - total / count) < 1e-5


def test_label_smoothing_forms_others_and_uniform_in_float64() -> None:
    """Issue 41 item 5: "others" (today's fairseq, the default) puts eps / (V - 1) on every other word;
    "uniform" (fairseq <= 0.10, BART's era) puts eps / V on every word, as torch's label_smoothing does."""
    import torch
    from torch.nn import functional as F

    from synopsis.config import load_config
    from synopsis.errors import ConfigError
    from synopsis.training.objectives import label_smoothed_nll
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7, dtype=torch.float64) * 3
    labels = torch.tensor([[1, 2, 3, -100, -100], [6, 0, 5, 4, 2]])
    eps, vocab = 0.1, logits.size(-1)
    uniform = label_smoothed_nll(logits, labels, eps, "uniform")
    assert uniform.dtype == torch.float64
    flat = logits.flatten(0, 1), labels.flatten()
    torch_form = F.cross_entropy(*flat, ignore_index=-100, label_smoothing=eps)
    assert abs(float(uniform - torch_form)) < 1e-14
    others = label_smoothed_nll(logits, labels, eps)
    log_probs = torch.log_softmax(logits, -1)
    expected = []
    for row, t in zip(*torch.nonzero(labels >= 0, as_tuple=True), strict=True):
        q = torch.full((vocab,), eps / (vocab - 1), dtype=torch.float64)
        q[labels[row, t]] = 1 - eps
        expected.append(-(q * log_probs[row, t]).sum())
    assert abs(float(others - torch.stack(expected).mean())) < 1e-14
    assert abs(float(others - uniform)) > 1e-4  # the forms differ (at V = 7)
    given = {"model": "/m", "output_dir": "r", "train_path": "t"}
    assert load_config(Seq2SeqTrainConfig, None, given).label_smoothing_form == "others"
    chosen = load_config(Seq2SeqTrainConfig, None, {**given, "label_smoothing_form": "uniform"})
    assert chosen.label_smoothing_form == "uniform"
    with pytest.raises(ConfigError, match="'others' or 'uniform'"):
        load_config(Seq2SeqTrainConfig, None, {**given, "label_smoothing_form": "fairseq"})


def test_label_smoothing_and_decoding_are_config_keys_settable_with_set() -> None:
    from synopsis.config import load_config, parse_overrides
    from synopsis.errors import ConfigError
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    given = {"model": "m", "output_dir": "o", "train_path": "t"}
    assert load_config(Seq2SeqTrainConfig, None, given).label_smoothing == 0.0
    sets = parse_overrides(["label_smoothing=0.1", "generation={num_beams: 4, length_penalty: 2.0}"])
    config = load_config(Seq2SeqTrainConfig, None, {**given, **sets})
    assert config.label_smoothing == 0.1 and config.generation == {"num_beams": 4, "length_penalty": 2.0}
    for bad in (
        ["label_smoothing=1.0"],
        ["generation={beams: 4}"],
        ["generation={min_length: 9, max_length: 4}"],
    ):
        with pytest.raises(ConfigError):
            load_config(Seq2SeqTrainConfig, None, {**given, **parse_overrides(bad)})


def test_hie_bart_config_is_the_papers_recipe() -> None:
    from synopsis.config import load_config
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    configs = Path(__file__).resolve().parents[1] / "configs"
    hie = load_config(Seq2SeqTrainConfig, configs / "hie_bart_cnndm.yaml", {"model": "/m", "output_dir": "r"})
    # issue 51 item 3: the authors' fork (akiyama-ai/Hie-BART, label_smoothed_cross_entropy.py) smooths with
    # eps_i = epsilon / lprobs.size(-1): eps/V on every word, "uniform" (not today's fairseq eps/(V-1))
    assert (hie.label_smoothing, hie.label_smoothing_form) == (0.1, "uniform")
    assert hie.generation == {
        "num_beams": 4, "length_penalty": 2.0, "min_length": 55, "max_length": 140, "no_repeat_ngram_size": 3
    }  # fmt: skip
    assert (hie.max_steps, hie.batch_size * hie.grad_accum_steps, hie.warmup_steps) == (23916, 72, 500)
    assert (hie.learning_rate, hie.clip_grad_norm) == (3e-5, 0.1)
    header = (configs / "hie_bart_cnndm.yaml").read_text()
    assert "Departures" in header
    test_command = header[header.index("synopsis summarize") :].split("\n\n")[0]
    assert "--num-beams" not in test_command  # the checkpoint carries the decoding


@pytest.mark.slow
def test_trained_model_carries_the_configs_decoding_and_uses_label_smoothing(
    sources: dict[str, Path], shared_data: Path, tmp_path: Path
) -> None:
    from itertools import islice

    import torch

    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus
    from synopsis.summarizers.seq2seq import Seq2SeqSummarizer
    from synopsis.training.objectives import label_smoothed_nll
    from synopsis.training.seq2seq import Seq2SeqTrainConfig, Seq2SeqTrainer

    examples = list(islice(read_corpus("scitldr", shared_data / "scitldr", split="train"), 8))
    write_examples(examples, tmp_path / "train.jsonl")
    decoding = {
        "num_beams": 2,
        "length_penalty": 2.0,
        "min_length": 3,
        "max_length": 12,
        "no_repeat_ngram_size": 3,
    }
    config = Seq2SeqTrainConfig(
        model=str(save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")),  # no generation settings
        output_dir=str(tmp_path / "run"),
        train_path=str(tmp_path / "train.jsonl"),
        max_dev_examples=2,
        max_source_length=48,
        max_target_length=12,
        batch_size=4,
        max_steps=1,
        eval_every=1,
        eval_max_length=8,
        label_smoothing=0.1,
        generation=decoding,
        convert={"method": "hie-bart", "word_heads": 2},
    )
    trainer = Seq2SeqTrainer(config, show_progress=False)
    batch = trainer.inputs.model_inputs(
        trainer.inputs.collate(trainer.data.train_sources[:4], trainer.data.train_targets[:4])
    )
    trainer.model.eval()  # no dropout: two forward passes agree
    with torch.no_grad():
        logits = trainer.model(**batch).logits
        assert torch.allclose(trainer.training_loss(batch), label_smoothed_nll(logits, batch["labels"], 0.1))
    trainer.train()
    # lengths are summary tokens: stored as Hugging Face counts them, with the decoder start token
    stored = {**decoding, "min_length": 4, "max_length": 13}
    saved = json.loads((tmp_path / "run" / "best" / "generation_config.json").read_text())
    assert {k: saved[k] for k in decoding} == stored
    summarizer = Seq2SeqSummarizer.from_pretrained(tmp_path / "run" / "best")
    assert {k: getattr(summarizer.model.generation_config, k) for k in decoding} == stored


# ---------------------------------------------------------------------------- pointer-generator init
def test_pointer_generator_init_is_the_authors_and_the_old_one_is_a_config_key() -> None:
    import torch

    from synopsis.config import load_config
    from synopsis.errors import ConfigError
    from synopsis.models.pointer_generator import PointerGenerator, config_for_vocab, init_weights
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig
    from synopsis.vocab import Vocab

    assert PointerGeneratorTrainConfig().model.init == "authors"
    old = load_config(PointerGeneratorTrainConfig, None, {"model": {"init": "pytorch"}})
    assert old.model.init == "pytorch"
    with pytest.raises(ConfigError, match="model.init"):
        load_config(PointerGeneratorTrainConfig, None, {"model": {"init": "xavier"}})

    vocab = Vocab.build([[f"w{i}" for i in range(300)]], max_size=400)
    torch.manual_seed(0)
    config = config_for_vocab(vocab, embedding_dim=32, hidden_dim=48)
    model = init_weights(PointerGenerator(config), "authors")
    lstm = [model.encoder.weight_ih_l0, model.encoder.weight_hh_l0_reverse, model.decoder.weight_hh]
    for weight in lstm:
        assert 0.018 < float(weight.detach().abs().max()) <= 0.02
        assert abs(float(weight.detach().std()) - 0.02 / 3**0.5) < 1e-3  # uniform +-0.02
    forget = model.decoder.bias_ih[48:96]
    assert bool((forget == 1).all()) and float(model.decoder.bias_hh.detach().abs().sum()) == 0.0
    others = [
        model.embedding.weight[1:],
        model.attn_decoder.weight,
        model.out_vocab.weight,
        model.p_gen_linear.weight,
    ]
    for weight in others:
        assert float(weight.detach().abs().max()) <= 2e-4  # truncated at two standard deviations
        assert 0.7e-4 < float(weight.detach().std()) < 1e-4
    assert float(model.embedding.weight[vocab.pad_id].detach().abs().sum()) == 0.0
    # the old init: PyTorch's defaults, embeddings N(0, 1)
    torch.manual_seed(0)
    default = init_weights(PointerGenerator(config), "pytorch")
    assert float(default.embedding.weight[1:].detach().std()) > 0.9


# ---------------------------------------------------------------------------- CNN/DailyMail targets
def test_cnn_highlights_end_with_a_period_as_in_see_et_al(shared_data: Path) -> None:
    from synopsis.data.readers import read_corpus
    from synopsis.data.readers.cnn import END_TOKENS, split_story
    from synopsis.models.pointer_generator import summary_words

    folder = shared_data / "cnndm_stories"
    if not folder.is_dir():
        missing_shared_data(f"{folder} is not available")
    raw = [h for story in sorted(folder.glob("*.story")) for h in split_story(story.read_text())[1]]
    unended = [h for h in raw if not h.endswith(END_TOKENS)]
    # as the stories are written: 57 of 59 without a final period, 51 without any sentence-final mark
    assert len(raw) == 59 and sum(not h.endswith(".") for h in raw) == 57 and len(unended) == 51
    examples = list(read_corpus("cnn", folder))
    highlights = [line for e in examples for line in e.references[0].split("\n")]
    assert len(highlights) == len(raw)
    assert all(h.endswith(END_TOKENS) for h in highlights)
    for written, read in zip(raw, highlights, strict=True):
        assert read == (written if written.endswith(END_TOKENS) else written + ".")
    # the word-tokenised target (what both methods train on) ends every fixed highlight with a period
    for written, read in zip(raw, highlights, strict=True):
        if not written.endswith(END_TOKENS):
            assert summary_words(read)[-1] == "."


# ---------------------------------------------------------------------------- Hie-BART sentence marker
def test_hie_bart_marks_sentences_with_barts_own_bos_by_default(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    import torch

    from synopsis.document import Document
    from synopsis.models.hie_bart import sentence_membership
    from synopsis.models.inputs import Seq2SeqInputs

    bart, bart_tokenizer = load_seq2seq(sources["bart"])
    model, tokenizer = load_seq2seq(
        convert_checkpoint("hie-bart", sources["bart"], tmp_path / "h", word_heads=2)
    )
    assert model.config.sentence_start_token == "<s>"
    assert model.config.sentence_start_token_id == tokenizer.bos_token_id
    assert len(tokenizer) == len(bart_tokenizer)  # no new token, no new embedding row
    assert model.get_input_embeddings().num_embeddings == bart.get_input_embeddings().num_embeddings

    document = Document.from_text("The first one is here. A second follows it. Third, and last.")
    (encoding,) = Seq2SeqInputs(model.config, tokenizer).encode_sources([document])
    ids = encoding.input_ids
    bos = tokenizer.bos_token_id
    assert ids[0] == bos and ids.count(bos) == len(document.sentences) == 3  # one <s> per sentence
    # without the markers, the tokens are exactly stock BART's for the same text
    (plain,) = Seq2SeqInputs(bart.config, bart_tokenizer).encode_sources([document])
    assert [bos] + [t for t in ids[1:] if t != bos] == plain.input_ids
    # every token of sentence m is in sentence m of the model's split
    weights, mask = sentence_membership(torch.tensor([ids]), None, model.config.sentence_start_token_id)
    assert mask.sum() == 3
    owner = weights[0].argmax(0).tolist()
    labels = encoding.sentence_ids
    for position, label in enumerate(labels):
        if label >= 0:
            assert owner[position] == label, (position, owner, labels)


def test_hie_bart_without_sentence_heads_inserts_no_marker(sources: dict[str, Path], tmp_path: Path) -> None:
    from synopsis.document import Document
    from synopsis.models.inputs import Seq2SeqInputs

    bart, bart_tokenizer = load_seq2seq(sources["bart"])
    for marker in ("<s>", "<sent>"):
        out = tmp_path / marker.strip("<>")
        model, tokenizer = load_seq2seq(
            convert_checkpoint("hie-bart", sources["bart"], out, word_heads=4, sentence_start_token=marker)
        )
        assert len(tokenizer) == len(bart_tokenizer)
        documents = [Document.from_text("One sentence here. Another one there. And a third.")]
        ours = Seq2SeqInputs(model.config, tokenizer).encode_sources(documents)
        stock = Seq2SeqInputs(bart.config, bart_tokenizer).encode_sources(documents)
        assert [e.input_ids for e in ours] == [e.input_ids for e in stock]


def test_new_sentence_token_stays_an_option(sources: dict[str, Path], tmp_path: Path) -> None:
    out = convert_checkpoint(
        "hie-bart", sources["bart"], tmp_path / "h", word_heads=2, sentence_start_token="<sent>"
    )
    model, tokenizer = load_seq2seq(out)
    assert (
        model.config.sentence_start_token_id
        == tokenizer.convert_tokens_to_ids("<sent>")
        == len(tokenizer) - 1
    )
