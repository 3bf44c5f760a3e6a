"""The fast pointer-generator (fused LSTM encoder, fused attention energy, CopyMixture) against the
implementation it replaced (``helpers/pointer_generator_reference.py``) on the same weights, and the bundled
model's summaries pinned from before the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.pointer_generator_reference import ReferencePointerGenerator

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.models.pointer_generator import (
    PointerGenerator,
    config_for_vocab,
    document_words,
    encode_batch,
    summary_words,
)
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer, bundled_model_dir
from synopsis.training.pointer_generator import Pair, collate
from synopsis.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
PINNED = Path(__file__).parent / "data" / "pointer_generator_bundled_summaries.json"
TOL = 1e-5

TEXTS = [
    "the quick model reads a long article about rare zyzzyva words and copies the zyzzyva words it needs",
    "a short one",
    "coverage keeps the decoder from repeating the same phrase over and over in the summary of a paper",
    "x",
]
SUMMARIES = ["the model copies zyzzyva words", "short", "coverage stops repetition of the same phrase", "x y"]


def pair_of_models(
    pointer: bool, coverage: bool, dropout: float = 0.0
) -> tuple[PointerGenerator, ReferencePointerGenerator, Vocab]:
    vocab = Vocab.build([summary_words(t) for t in TEXTS[:2]], max_size=40)
    config = config_for_vocab(
        vocab, embedding_dim=16, hidden_dim=24, pointer=pointer, coverage=coverage, dropout=dropout
    )
    torch.manual_seed(3)
    fast = PointerGenerator(config)
    with torch.no_grad():  # larger weights than the default init, so that differences would show
        for p in fast.parameters():
            p.mul_(3.0)
    reference = ReferencePointerGenerator(config)
    reference.load_state_dict(fast.state_dict())
    return fast, reference, vocab


def training_batch(vocab: Vocab):
    pairs = [Pair(document_words(t), summary_words(s)) for t, s in zip(TEXTS, SUMMARIES, strict=True)]
    return collate(pairs, vocab, max_source=400, max_target=100)


@pytest.mark.parametrize(
    ("pointer", "coverage", "dropout"),
    [(True, True, 0.0), (True, False, 0.0), (False, False, 0.0), (True, True, 0.3)],
)
def test_training_loss_and_gradients_equal_the_reference(
    pointer: bool, coverage: bool, dropout: float
) -> None:
    fast, reference, vocab = pair_of_models(pointer, coverage, dropout)
    b = training_batch(vocab)
    results = []
    for model in (fast, reference):
        model.train()
        model.zero_grad()
        torch.manual_seed(11)  # the same dropout masks: both draw them in the same order
        out = model(b.input_ids, b.decoder_input_ids, b.labels, b.extended_ids, b.num_oovs)
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((out, grads))
    (ours, our_grads), (ref, ref_grads) = results
    assert ours.num_tokens == ref.num_tokens
    assert torch.allclose(ours.token_nll, ref.token_nll, atol=TOL, rtol=TOL)
    assert float(ours.loss.detach()) == pytest.approx(float(ref.loss.detach()), abs=TOL, rel=TOL)
    assert float(ours.coverage_loss.detach()) == pytest.approx(
        float(ref.coverage_loss.detach()), abs=TOL, rel=TOL
    )
    assert our_grads.keys() == ref_grads.keys()
    for name, grad in ref_grads.items():
        assert torch.allclose(our_grads[name], grad, atol=TOL, rtol=TOL), name


@pytest.mark.parametrize(("pointer", "coverage"), [(True, True), (True, False), (False, False)])
def test_encoder_and_decoder_steps_equal_the_reference(pointer: bool, coverage: bool) -> None:
    fast, reference, vocab = pair_of_models(pointer, coverage)
    b = training_batch(vocab)
    with torch.inference_mode():
        (memory, state), (ref_memory, ref_state) = (
            m.eval().encode(b.input_ids, b.extended_ids, b.num_oovs) for m in (fast, reference)
        )
        assert torch.allclose(memory.states, ref_memory.states, atol=TOL)
        assert torch.allclose(state.h, ref_state.h, atol=TOL) and torch.allclose(
            state.c, ref_state.c, atol=TOL
        )
        tokens = torch.full((len(TEXTS),), vocab.bos_id)
        for _ in range(6):
            step, ref_step = (
                fast.decode_step(tokens, state, memory),
                reference.decode_step(tokens, ref_state, ref_memory),
            )
            assert torch.allclose(step.probs, ref_step.probs, atol=TOL)
            assert torch.allclose(step.attention, ref_step.attention, atol=TOL)
            assert torch.allclose(step.p_gen, ref_step.p_gen, atol=TOL)
            tokens = ref_step.probs.argmax(-1)  # the same (extended) ids into both
            state, ref_state = step.state, ref_step.state


def test_training_and_summarization_share_preprocessing() -> None:
    """The summarizer's encoder inputs for a document are the trainer's for the same document."""
    _, _, vocab = pair_of_models(True, True)
    documents = [Document.from_text(t) for t in TEXTS]
    trained = collate([Pair(document_words(d), ["x"]) for d in documents], vocab, 9, 5)
    summarized = encode_batch(vocab, [document_words(d) for d in documents], max_source=9)
    assert torch.equal(trained.input_ids, summarized.input_ids)
    assert torch.equal(trained.extended_ids, summarized.extended_ids)
    assert trained.oovs == summarized.oovs and summarized.labels is None


def pinned_documents(shared: Path | None) -> tuple[list[dict], list[Document]]:
    entries = json.loads(PINNED.read_text(encoding="utf-8"))["summaries"]
    lines = (shared / "scitldr" / "dev.jsonl").read_text(encoding="utf-8").splitlines() if shared else []
    kept, documents = [], []
    for entry in entries:
        if entry["id"].startswith("examples/"):
            text = (ROOT / entry["id"]).read_text(encoding="utf-8")
        elif lines:
            text = " ".join(json.loads(lines[int(entry["id"].rsplit("-", 1)[1])])["source"])
        else:
            continue
        kept.append(entry)
        documents.append(Document.from_text(text, id=entry["id"]))
    return kept, documents


def test_bundled_model_summaries_are_unchanged(shared_data: Path) -> None:
    """Byte-identical beam-4 and greedy summaries of the bundled model, recorded before the speed work."""
    entries, documents = pinned_documents(shared_data)
    assert len(entries) == 7
    beam = PointerGeneratorSummarizer.from_pretrained().summarize(documents)
    greedy = PointerGeneratorSummarizer.from_pretrained().summarize(
        documents, decoding=DecodingOptions(num_beams=1)
    )
    assert beam == [e["beam4"] for e in entries]
    assert greedy == [e["greedy"] for e in entries]


@pytest.mark.parametrize("member", [0, 1])
def test_bundled_model_step_distributions_equal_the_reference(member: int) -> None:
    """On the shipped weights (no shared data needed), each member of the bundled ensemble: encoder and 8
    greedy steps within 1e-5."""
    ensemble, vocab = PointerGenerator.from_pretrained(bundled_model_dir())
    fast = ensemble.members[member]
    reference = ReferencePointerGenerator(fast.config).eval()
    reference.load_state_dict(fast.state_dict())
    text = (ROOT / "examples" / "paper_abstract.txt").read_text(encoding="utf-8")
    words = document_words(text)
    b = encode_batch(vocab, [words, words[:40], words[100:]], max_source=250)
    with torch.inference_mode():
        (memory, state), (ref_memory, ref_state) = (
            m.encode(b.input_ids, b.extended_ids, b.num_oovs) for m in (fast, reference)
        )
        tokens = torch.full((3,), vocab.bos_id)
        for _ in range(8):
            step, ref_step = (
                fast.decode_step(tokens, state, memory),
                reference.decode_step(tokens, ref_state, ref_memory),
            )
            assert torch.allclose(step.probs, ref_step.probs, atol=TOL)
            tokens = ref_step.probs.argmax(-1)
            state, ref_state = step.state, ref_step.state


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_summarizes_on_a_gpu() -> None:  # pragma: no cover - CPU-only CI
    summarizer = PointerGeneratorSummarizer.from_pretrained()
    beams = DecodingOptions(num_beams=2)
    summarizer.model.cuda()
    text = (ROOT / "examples" / "paper_abstract.txt").read_text(encoding="utf-8")
    on_gpu = summarizer.summarize([Document.from_text(text)], decoding=beams)
    summarizer.model.cpu()
    assert on_gpu == summarizer.summarize([Document.from_text(text)], decoding=beams)
