"""Pointer-generator model and vocabulary: the final distribution, losses, numerics and files."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from synopsis.config import DecodingOptions
from synopsis.errors import CheckpointError, InputError
from synopsis.models.pointer_generator import PointerGenerator, PointerGeneratorEnsemble, config_for_vocab
from synopsis.vocab import UNK, Vocab

WORDS = "the model copies rare words from the article into the summary".split()


def tiny_vocab() -> Vocab:
    return Vocab.build([WORDS], max_size=50)


def tiny_model(pointer: bool = True, coverage: bool = True, seed: int = 0) -> tuple[PointerGenerator, Vocab]:
    torch.manual_seed(seed)
    vocab = tiny_vocab()
    config = config_for_vocab(vocab, embedding_dim=8, hidden_dim=12, pointer=pointer, coverage=coverage)
    return PointerGenerator(config).eval(), vocab


def batch(vocab: Vocab, articles: list[list[str]], summaries: list[list[str]]):
    sources = [vocab.encode_source(a) for a in articles]
    width = max(len(a) for a in articles)
    ids = torch.tensor([s.ids + [vocab.pad_id] * (width - len(s.ids)) for s in sources])
    ext = torch.tensor([s.extended_ids + [vocab.pad_id] * (width - len(s.ids)) for s in sources])
    targets = [vocab.encode_target(t, s.oovs) for t, s in zip(summaries, sources, strict=True)]
    t_width = max(len(t) for t in targets) + 1
    labels = torch.tensor([t + [vocab.eos_id] + [vocab.pad_id] * (t_width - len(t) - 1) for t in targets])
    dec_in = torch.tensor([[vocab.bos_id] + t + [vocab.pad_id] * (t_width - len(t) - 1) for t in targets])
    return ids, ext, dec_in, labels, max(len(s.oovs) for s in sources), sources


ARTICLES = [
    "the zyzzyva model copies the zyzzyva wombat words".split(),
    "rare words from the quokka article".split(),
]
SUMMARIES = [["zyzzyva", "copies", "the", "words"], ["quokka", "words", "unseen"]]


# ---------------------------------------------------------------------- vocabulary
def test_vocab_extended_ids_and_decoding() -> None:
    vocab = tiny_vocab()
    src = vocab.encode_source("the zyzzyva model zyzzyva quokka".split())
    assert src.oovs == ["zyzzyva", "quokka"]
    v = len(vocab)
    assert src.ids[1] == vocab.unk_id and src.extended_ids[1] == v and src.extended_ids[3] == v
    assert src.extended_ids[4] == v + 1
    target = vocab.encode_target("quokka model unseen".split(), src.oovs)
    assert target == [v + 1, vocab.id("model"), vocab.unk_id]  # OOV not in the article -> UNK
    assert vocab.decode(target, src.oovs) == ["quokka", "model", UNK]
    assert vocab.decode([v + 7], src.oovs) == [UNK]  # out of range: UNK, never an IndexError


def test_vocab_build_limits_and_roundtrip(tmp_path) -> None:
    vocab = Vocab.build([["a", "a", "b", "b", "c"], ["a", "d"]], max_size=2, min_count=2)
    assert vocab.tokens[4:] == ["a", "b"]
    vocab.save(tmp_path / "v.txt")
    loaded = Vocab.load(tmp_path / "v.txt")
    assert loaded.tokens == vocab.tokens and loaded.fingerprint == vocab.fingerprint
    (tmp_path / "bad.txt").write_text("<pad>\t0\nno-tab-here\n")
    with pytest.raises(InputError, match="bad.txt:2"):
        Vocab.load(tmp_path / "bad.txt")


# ---------------------------------------------------------------------- final distribution
def test_final_distribution_scatter_adds_duplicate_source_tokens() -> None:
    model, vocab = tiny_model(coverage=False)
    ids, ext, dec_in, _, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    with torch.no_grad():
        encoder, state = model.encode(ids, ext, num_oovs)
        out = model.decode_step(dec_in[:, 0], state, encoder)
        features, attention, p_gen, _ = model._recurrent_step(dec_in[:, 0], state, encoder)
        vocab_probs = torch.softmax(model._vocab_logits(features), dim=-1)
    assert out.probs.shape == (2, len(vocab) + num_oovs)
    assert torch.allclose(out.probs.sum(-1), torch.ones(2), atol=1e-5)
    # "zyzzyva" sits at positions 1 and 5 of article 0: its copy probability is the sum of both weights.
    zyzzyva = len(vocab)
    expected = (1 - p_gen[0]) * (attention[0, 1] + attention[0, 5])
    assert torch.allclose(out.probs[0, zyzzyva], expected, atol=1e-6)
    # "the" (in vocabulary) appears at positions 0 and 4: generation + both copy weights.
    the = vocab.id("the")
    expected = p_gen[0] * vocab_probs[0, the] + (1 - p_gen[0]) * (attention[0, 0] + attention[0, 4])
    assert torch.allclose(out.probs[0, the], expected, atol=1e-6)
    # Article 1 has one OOV ("quokka"); the batch's second OOV slot belongs to article 0 only.
    assert out.probs[1, len(vocab) + 1] == 0


def test_hypotheses_share_their_source_as_if_it_were_copied() -> None:
    """K decoder rows per source (a beam search's hypotheses) read one encoder output per source: every step's
    distribution, attention, coverage and state equal those of the same rows over an encoder output copied K
    times, and so do the gradients of every parameter through AttentionEnergy's backward."""
    model, vocab = tiny_model(coverage=True)
    model = model.double()
    ids, ext, dec_in, _, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    k = 3
    torch.manual_seed(1)
    # Different tokens per hypothesis, so the K rows of a source really differ.
    tokens = torch.randint(4, len(vocab), (dec_in.size(0) * k, 4))

    def run(shared: bool) -> tuple[list, dict[str, torch.Tensor]]:
        model.zero_grad()
        encoder, state = model.encode(ids, ext, num_oovs)
        state = dataclasses.replace(
            state, **{f: getattr(state, f).repeat_interleave(k, 0) for f in ("h", "c", "context", "coverage")}
        )
        if not shared:
            encoder = dataclasses.replace(
                encoder,
                **{
                    f: getattr(encoder, f).repeat_interleave(k, 0)
                    for f in ("states", "features", "mask", "extended_ids")
                },
            )
        outputs, loss = [], 0.0
        for t in range(tokens.size(1)):
            out = model.decode_step(tokens[:, t], state, encoder)
            outputs.append(
                (out.probs, out.attention, out.coverage, out.p_gen, out.state.h, out.state.context)
            )
            loss = loss + out.probs.clamp_min(1e-12).log()[:, :5].sum() + (out.attention * out.coverage).sum()
            state = out.state
        loss.backward()
        return outputs, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    shared_out, shared_grads = run(shared=True)
    copied_out, copied_grads = run(shared=False)
    for shared_step, copied_step in zip(shared_out, copied_out, strict=True):
        for mine, theirs in zip(shared_step, copied_step, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
    assert shared_grads.keys() == copied_grads.keys() and "attn_encoder.weight" in shared_grads
    for name, grad in shared_grads.items():
        torch.testing.assert_close(grad, copied_grads[name], rtol=1e-10, atol=1e-12, msg=name)
    encoder, state = model.encode(ids, ext, num_oovs)
    five = dataclasses.replace(
        state, **{f: getattr(state, f)[:1].expand(5, -1) for f in ("h", "c", "context", "coverage")}
    )
    with pytest.raises(ValueError, match="5 decoder rows for 2 sources"):
        model.decode_step(tokens[:5, 0], five, encoder)


@pytest.mark.parametrize("pointer", [True, False])
def test_copy_mixture_paths_agree(pointer: bool) -> None:
    """The decoding path (one buffer written in place), the autograd path (out of place) and the ensemble's
    scaled, added-in-place form give the same distribution."""
    from synopsis.models.copy_attention import CopyMixture

    model, vocab = tiny_model(pointer=pointer)
    mixture = CopyMixture(model.config)
    torch.manual_seed(0)
    rows, length, num_oovs = 6, 5, 3
    logits = torch.randn(rows, len(vocab), dtype=torch.float64)
    attention = torch.softmax(torch.randn(rows, length, dtype=torch.float64), -1)
    p_gen = torch.rand(rows, dtype=torch.float64)
    ids = torch.randint(0, len(vocab) + num_oovs, (rows, length))
    with torch.enable_grad():
        taped = mixture(logits.requires_grad_(), attention, p_gen, ids, num_oovs)
    with torch.no_grad():
        decoded = mixture(logits, attention, p_gen, ids, num_oovs)
        base = torch.rand_like(decoded)
        added = mixture(logits, attention, p_gen, ids, num_oovs, scale=0.25, add_to=base.clone())
    assert taped.requires_grad and decoded.shape == (rows, len(vocab) + (num_oovs if pointer else 0))
    torch.testing.assert_close(decoded, taped.detach(), rtol=0, atol=1e-15)
    torch.testing.assert_close(added, base + 0.25 * decoded, rtol=0, atol=1e-15)
    torch.testing.assert_close(decoded.sum(-1), torch.ones(rows, dtype=torch.float64))


def test_teacher_forced_loss_equals_step_by_step_distribution() -> None:
    model, vocab = tiny_model(coverage=True)
    ids, ext, dec_in, labels, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    with torch.no_grad():
        out = model(ids, dec_in, labels, ext, num_oovs)
        encoder, state = model.encode(ids, ext, num_oovs)
        nll, cov, count = [0.0, 0.0], [0.0, 0.0], [0, 0]
        for t in range(labels.size(1)):
            step = model.decode_step(dec_in[:, t], state, encoder)
            state = step.state
            for b in range(2):
                if labels[b, t] != vocab.pad_id:
                    nll[b] -= float(torch.log(step.probs[b, labels[b, t]]))
                    # coverage loss by hand: sum_i min(a_i^t, c_i^t) with c^t = sum of earlier attentions
                    cov[b] += float(torch.minimum(step.attention[b], step.coverage[b]).sum())
                    count[b] += 1
    assert out.num_tokens == sum(count) and out.num_summaries == 2 and count[0] != count[1]
    # See et al.: each summary's mean over its own steps, then the mean over the summaries
    mean_nll = (nll[0] / count[0] + nll[1] / count[1]) / 2
    mean_cov = (cov[0] / count[0] + cov[1] / count[1]) / 2
    assert float(out.nll) == pytest.approx(mean_nll, rel=1e-5)
    assert float(out.coverage_loss) == pytest.approx(mean_cov, rel=1e-5)
    assert float(out.coverage_loss) > 0
    assert float(out.loss) == pytest.approx(mean_nll + mean_cov, rel=1e-5)


def test_batch_loss_is_the_mean_of_each_summarys_loss_alone() -> None:
    """Per-summary averaging (See et al.; their code's _mask_and_avg): a long summary weighs as much as a
    short one, for the NLL and the coverage loss alike."""
    model, vocab = tiny_model(coverage=True)
    ids, ext, dec_in, labels, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    assert labels.ne(vocab.pad_id).sum(-1).unique().numel() == 2  # summaries of different lengths
    with torch.no_grad():
        together = model(ids, dec_in, labels, ext, num_oovs)
        alone = []
        for article, summary in zip(ARTICLES, SUMMARIES, strict=True):
            one_ids, one_ext, one_dec_in, one_labels, one_oovs, _ = batch(vocab, [article], [summary])
            alone.append(model(one_ids, one_dec_in, one_labels, one_ext, one_oovs))
    for name in ("loss", "nll", "coverage_loss"):
        expected = sum(float(getattr(out, name)) for out in alone) / 2
        assert float(getattr(together, name)) == pytest.approx(expected, rel=1e-5), name


def test_coverage_vector_is_the_sum_of_previous_attention() -> None:
    model, vocab = tiny_model(coverage=True)
    ids, ext, dec_in, _, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    with torch.no_grad():
        encoder, state = model.encode(ids, ext, num_oovs)
        total = torch.zeros_like(state.coverage)
        for t in range(dec_in.size(1)):
            step = model.decode_step(dec_in[:, t], state, encoder)
            assert torch.allclose(step.coverage, total, atol=1e-6)
            total = total + step.attention
            state = step.state
    assert torch.all(step.attention[1, len(ARTICLES[1]) :] == 0)  # padding gets no attention


def test_pointer_off_is_plain_attention_seq2seq() -> None:
    model, vocab = tiny_model(pointer=False, coverage=False)
    ids, ext, dec_in, labels, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    out = model(ids, dec_in, labels, ext, num_oovs)
    out.loss.backward()
    assert model.p_gen_linear.weight.grad is None  # p_gen is not part of the computation
    with torch.no_grad():
        encoder, state = model.encode(ids, ext, num_oovs)
        step = model.decode_step(dec_in[:, 0], state, encoder)
        features, *_ = model._recurrent_step(dec_in[:, 0], state, encoder)
    assert step.probs.shape == (2, len(vocab))  # no extended vocabulary
    assert torch.allclose(step.probs, torch.softmax(model._vocab_logits(features), -1))
    # an OOV target is scored as UNK
    masked = labels.masked_fill(labels >= len(vocab), vocab.unk_id)
    assert float(model(ids, dec_in, masked, ext, num_oovs).loss.detach()) == pytest.approx(
        float(out.loss.detach()), rel=1e-6
    )


def test_decoder_reads_extended_ids_as_unk() -> None:
    model, vocab = tiny_model()
    ids, ext, _, _, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    with torch.no_grad():
        encoder, state = model.encode(ids, ext, num_oovs)
        copied = model.decode_step(torch.tensor([len(vocab), len(vocab) + 1]), state, encoder)
        unk = model.decode_step(torch.full((2,), vocab.unk_id), state, encoder)
    assert torch.equal(copied.probs, unk.probs)


# ---------------------------------------------------------------------- numerics
@pytest.mark.parametrize("bias", [100.0, -100.0])
def test_saturated_p_gen_gives_finite_loss_and_gradients(bias: float) -> None:
    model, vocab = tiny_model(coverage=True)
    with torch.no_grad():
        model.p_gen_linear.weight.zero_()
        model.p_gen_linear.bias.fill_(bias)  # p_gen exactly 1 (never copy) or 0 (only copy)
    # Targets include an OOV that can only be copied and a word that can only be generated.
    ids, ext, dec_in, labels, num_oovs, _ = batch(
        vocab, ARTICLES, [["zyzzyva", "summary"], ["into", "quokka"]]
    )
    out = model.train()(ids, dec_in, labels, ext, num_oovs)
    out.loss.backward()
    assert (
        torch.isfinite(out.loss) and float(out.loss.detach()) > 10
    )  # the impossible tokens cost ~ -log(1e-12)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_empty_target_and_empty_article_are_defined() -> None:
    model, vocab = tiny_model(coverage=True)
    ids, ext, dec_in, labels, num_oovs, _ = batch(vocab, ARTICLES, SUMMARIES)
    out = model(ids, dec_in, torch.full_like(labels, vocab.pad_id), ext, num_oovs)
    out.loss.backward()
    assert out.num_tokens == 0 and float(out.loss.detach()) == 0.0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    empty = torch.full((1, 3), vocab.pad_id)
    out = model(empty, dec_in[:1], labels[:1], empty, 0)
    assert torch.isfinite(out.loss)


# ---------------------------------------------------------------------- files
def test_save_and_load_roundtrip(tmp_path) -> None:
    model, vocab = tiny_model()
    model.save_pretrained(tmp_path / "m", vocab)
    loaded, loaded_vocab = PointerGenerator.from_pretrained(tmp_path / "m")
    assert loaded_vocab.tokens == vocab.tokens
    assert dataclasses.asdict(loaded.config) == dataclasses.asdict(model.config)
    for key, value in model.state_dict().items():
        assert torch.equal(value, loaded.state_dict()[key])


# ---------------------------------------------------------------------- ensembles
def test_ensemble_step_is_the_mean_of_its_members_distributions() -> None:
    """Each member keeps its own attention, coverage and state; the ensemble's distribution over the extended
    vocabulary is the mean of theirs, step after step."""
    members = [tiny_model(seed=seed)[0] for seed in (0, 1)]
    vocab = tiny_vocab()
    ensemble = PointerGeneratorEnsemble.of(members[0].config, [m.state_dict() for m in members]).eval()
    assert ensemble.config.ensemble_size == 2 and members[0].config.ensemble_size == 1
    ids, ext, dec_in, _, n_oov, _ = batch(vocab, ARTICLES, SUMMARIES)
    with torch.no_grad():
        encoders, states = ensemble.encode(ids, ext, n_oov)
        alone = [m.encode(ids, ext, n_oov) for m in members]
        for t in range(dec_in.shape[1]):
            out = ensemble.decode_step(dec_in[:, t], states, encoders)
            steps = [m.decode_step(dec_in[:, t], s, e) for m, (e, s) in zip(members, alone, strict=True)]
            alone = [(e, step.state) for (e, _), step in zip(alone, steps, strict=True)]
            torch.testing.assert_close(out.probs, (steps[0].probs + steps[1].probs) / 2)
            assert not torch.allclose(steps[0].probs, steps[1].probs)
            for mine, theirs in zip(out.state, steps, strict=True):
                torch.testing.assert_close(mine.coverage, theirs.state.coverage)
            states = out.state


def test_ensemble_of_copies_summarizes_as_the_model_and_roundtrips(tmp_path) -> None:
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    model, vocab = tiny_model()
    PointerGeneratorEnsemble.of(model.config, [model.state_dict()] * 3).save_pretrained(tmp_path / "e", vocab)
    loaded, _ = PointerGenerator.from_pretrained(tmp_path / "e")  # the config says what it is
    assert isinstance(loaded, PointerGeneratorEnsemble) and len(loaded.members) == 3
    assert json.loads((tmp_path / "e" / "config.json").read_text())["ensemble_size"] == 3
    for member in loaded.members:
        for key, value in model.state_dict().items():
            assert torch.equal(member.state_dict()[key], value)
    options = {"num_beams": 3, "min_length": 2, "max_length": 8}
    single = PointerGeneratorSummarizer(model, vocab).generate(ARTICLES, min_length=2)
    assert PointerGeneratorSummarizer(loaded, vocab).generate(ARTICLES, min_length=2) == single
    model.save_pretrained(tmp_path / "m", vocab)
    by_path = [PointerGeneratorSummarizer.from_pretrained(tmp_path / d) for d in ("m", "e")]
    decoding = DecodingOptions(**options)
    first, second = (summarizer.generate(ARTICLES, decoding=decoding) for summarizer in by_path)
    assert first == second
    with pytest.raises(ValueError, match="ensemble_size >= 2"):
        PointerGeneratorEnsemble(model.config)
    with pytest.raises(ValueError, match="build a PointerGeneratorEnsemble"):
        PointerGenerator(loaded.config)


def test_bad_model_directories_raise_clear_errors(tmp_path) -> None:
    model, vocab = tiny_model()
    good = tmp_path / "m"
    model.save_pretrained(good, vocab)
    # a vocabulary that does not belong to the checkpoint
    other = Vocab.build([WORDS + ["extra"]], max_size=50)
    other.save(good / "vocab.txt")
    with pytest.raises(CheckpointError, match="does not match the checkpoint"):
        PointerGenerator.from_pretrained(good)
    vocab.save(good / "vocab.txt")
    # truncated weights
    weights = (good / "model.safetensors").read_bytes()
    (good / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        PointerGenerator.from_pretrained(good)
    # unknown key / wrong type in config.json
    model.save_pretrained(good, vocab)
    config = json.loads((good / "config.json").read_text())
    (good / "config.json").write_text(json.dumps({**config, "hiden_dim": 3}))
    with pytest.raises(CheckpointError, match="hiden_dim"):
        PointerGenerator.from_pretrained(good)
    (good / "config.json").write_text(json.dumps({**config, "hidden_dim": "twelve"}))
    with pytest.raises(CheckpointError, match="hidden_dim"):
        PointerGenerator.from_pretrained(good)
    with pytest.raises(CheckpointError, match="no such model directory"):
        PointerGenerator.from_pretrained(tmp_path / "missing")


def test_encoder_equals_a_packed_bidirectional_lstm() -> None:
    """The padded-batch encoder gives the packed nn.LSTM's outputs, final states and gradients."""
    model, _ = tiny_model()
    embedded = torch.randn(4, 7, 8, requires_grad=True)
    lengths = torch.tensor([7, 4, 1, 6])
    mask = torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)
    ours, h_ours, c_ours = model._bidirectional(embedded, mask)
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        embedded, lengths, batch_first=True, enforce_sorted=False
    )
    out, (h_n, c_n) = model.encoder(packed)
    reference, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=7)
    assert torch.allclose(ours, reference, atol=1e-6)
    assert torch.equal(ours[~mask], torch.zeros_like(ours[~mask]))  # padding: exactly zero
    assert torch.allclose(h_ours, torch.cat([h_n[0], h_n[1]], dim=-1), atol=1e-6)
    assert torch.allclose(c_ours, torch.cat([c_n[0], c_n[1]], dim=-1), atol=1e-6)
    (grad_ours,) = torch.autograd.grad((ours**2).sum() + c_ours.sum(), embedded)
    (grad_ref,) = torch.autograd.grad((reference**2).sum() + c_n.sum(), embedded)
    assert torch.allclose(grad_ours, grad_ref, atol=1e-5)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_max_length_counts_words_as_its_help_says(num_beams: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--max-length N``: at most N words, and N when the minimum asks for it, each summary ended by EOS
    (before: the decoders counted EOS in max_length, so a summary that ended had at most N - 1 words)."""
    import synopsis.generation as generation
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    searched: list = []
    for name in ("beam_search", "greedy_search"):
        original = getattr(generation, name)

        def recording(*args, original=original, **kwargs):  # noqa: ANN002, ANN003, ANN202
            searched.extend(hypotheses := original(*args, **kwargs))
            return hypotheses

        monkeypatch.setattr(generation, name, recording)
    model, vocab = tiny_model()
    for length in (1, 4, 7):
        options = {"num_beams": num_beams, "min_length": length, "max_length": length}
        summarizer = PointerGeneratorSummarizer(model, vocab)
        searched.clear()
        decoding = DecodingOptions(**options)
        assert [len(words) for words in summarizer.generate(ARTICLES, decoding=decoding)] == [length, length]
        assert all(h.finished for h in searched)
        free = DecodingOptions(**{**options, "min_length": 0})
        assert all(len(words) <= length for words in summarizer.generate(ARTICLES, decoding=free))
