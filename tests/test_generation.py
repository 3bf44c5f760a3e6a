"""Decoding strategies on toy step functions whose best sequences can be found by brute force."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
import torch

from synopsis.generation import (
    AllowedTokensProcessor,
    LogitsProcessorList,
    MinLengthProcessor,
    NoImmediateRepeatProcessor,
    NoRepeatNGramProcessor,
    build_processors,
    length_normalize,
)
from synopsis.generation import beam_search as _beam_search
from synopsis.generation import greedy_search as _greedy_search

BOS, EOS = 0, 1


def _processors(min_length: int, no_repeat_ngram_size: int) -> LogitsProcessorList:
    return build_processors({"min_length": min_length, "no_repeat_ngram_size": no_repeat_ngram_size}, EOS)


def beam_search(*args, min_length: int = 1, no_repeat_ngram_size: int = 0, **kwargs):
    return _beam_search(*args, processors=_processors(min_length, no_repeat_ngram_size), **kwargs)


def greedy_search(*args, min_length: int = 1, no_repeat_ngram_size: int = 0, **kwargs):
    return _greedy_search(*args, processors=_processors(min_length, no_repeat_ngram_size), **kwargs)


@dataclass
class ToyState:
    last: torch.Tensor  # (N,) previous token
    total: (
        torch.Tensor
    )  # (N,) sum of tokens so far: the distribution depends on history, so reordering matters


def per_hypothesis(memory: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The memory's rows (one per document) repeated for the K consecutive hypotheses of each document."""
    return memory.repeat_interleave(tokens.size(0) // memory.size(0), dim=0)


def make_step(tables: torch.Tensor):
    """``tables[b]`` (V, V) of logits: row = previous token. The running token sum shifts the logits, so a
    decoder that forgets to reorder its state gets different scores than brute force."""

    def step(tokens: torch.Tensor, state: ToyState, memory: torch.Tensor):
        total = state.total + tokens
        vocab = torch.arange(memory.size(-1), dtype=torch.float)
        logits = per_hypothesis(memory, tokens)[torch.arange(tokens.size(0)), tokens] + 0.3 * torch.cos(
            total.float().unsqueeze(-1) * vocab
        )
        return torch.log_softmax(logits, dim=-1), ToyState(tokens, total)

    return step


def initial_state(batch: int) -> ToyState:
    return ToyState(torch.zeros(batch, dtype=torch.long), torch.zeros(batch, dtype=torch.long))


def brute_force(
    table: torch.Tensor, max_length: int, min_length: int, alpha: float
) -> tuple[list[int], float]:
    """Best EOS-terminated sequence over all sequences up to ``max_length`` tokens (EOS included)."""
    step = make_step(table.unsqueeze(0))
    vocab = table.size(0)
    best: tuple[list[int], float] = ([], -math.inf)
    for length in range(max(min_length, 1), max_length + 1):
        for body in itertools.product([t for t in range(vocab) if t != EOS], repeat=length - 1):
            seq = [*body, EOS]
            state, prev, total = initial_state(1), torch.tensor([BOS]), 0.0
            for token in seq:
                log_probs, state = step(prev, state, table.unsqueeze(0))
                total += float(log_probs[0, token])
                prev = torch.tensor([token])
            score = length_normalize(total, length, alpha)
            if score > best[1]:
                best = (list(body), score)
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_search_with_enough_beams_is_exact(alpha: float) -> None:
    # 100 beams exceed the 84 possible EOS-terminated sequences, so no hypothesis is ever pruned.
    torch.manual_seed(0)
    tables = torch.randn(3, 5, 5) * 2
    hyps = beam_search(
        make_step(tables), initial_state(3), tables, batch_size=3, bos_id=BOS, eos_id=EOS,
        num_beams=100, max_length=4, min_length=2, length_penalty=alpha,
    )  # fmt: skip
    for b in range(3):
        tokens, score = brute_force(tables[b], max_length=4, min_length=2, alpha=alpha)
        assert hyps[b].tokens == tokens
        assert hyps[b].score == pytest.approx(score, abs=1e-5)


def test_batched_beam_search_equals_one_document_at_a_time() -> None:
    torch.manual_seed(1)
    tables = torch.randn(4, 9, 9) * 3
    options = dict(bos_id=BOS, eos_id=EOS, num_beams=3, max_length=12, min_length=3, no_repeat_ngram_size=2)
    batched = beam_search(make_step(tables), initial_state(4), tables, batch_size=4, **options)
    for b in range(4):
        single = beam_search(
            make_step(tables[b : b + 1]), initial_state(1), tables[b : b + 1], batch_size=1, **options
        )
        assert batched[b].tokens == single[0].tokens
        assert batched[b].score == pytest.approx(single[0].score, abs=1e-5)


def test_finished_documents_leave_the_batch() -> None:
    """A document with K finished hypotheses stops being computed (the step sees fewer rows), and the others
    still get what they get alone: with traces, the n-gram ban and a per-document token mask (whose rows
    must follow the documents that stay)."""
    torch.manual_seed(4)
    tables = torch.randn(3, 9, 9) * 3
    tables[0, :, EOS] += 6.0  # document 0 ends at once, document 2 much later than document 1
    tables[1, :, EOS] += 1.0
    tables[2, :, EOS] -= 4.0
    allowed = torch.ones(3, 9, dtype=torch.bool)
    allowed[1, 4] = allowed[2, 5] = allowed[2, 6] = False
    rows: list[int] = []

    def search(docs: slice, record: bool = False):
        step = make_step(tables[docs])

        def counted(tokens: torch.Tensor, state: ToyState, memory: torch.Tensor):
            if record:
                rows.append(tokens.size(0))
            return step(tokens, state, memory)

        processors = _processors(2, 2)
        processors.append(AllowedTokensProcessor(allowed[docs]))
        batch = tables[docs].size(0)
        return _beam_search(
            counted, initial_state(batch), tables[docs], batch_size=batch, bos_id=BOS, eos_id=EOS,
            num_beams=3, max_length=14, processors=processors, trace=lambda state, row: int(state.total[row]),
        )  # fmt: skip

    batched = search(slice(0, 3), record=True)
    for b in range(3):
        (single,) = search(slice(b, b + 1))
        assert batched[b].tokens == single.tokens and batched[b].trace == single.trace
        assert batched[b].score == pytest.approx(single.score, abs=1e-5)
    assert not {4} & set(batched[1].tokens) and not {5, 6} & set(batched[2].tokens)
    assert rows[0] == 9 and rows[-1] == 3, rows  # 3 documents x 3 beams, at the end only document 2's
    assert sorted(rows, reverse=True) == rows


def test_single_beam_equals_greedy() -> None:
    torch.manual_seed(2)
    tables = torch.randn(5, 7, 7) * 2
    beam = beam_search(make_step(tables), initial_state(5), tables, batch_size=5, bos_id=BOS, eos_id=EOS,
                       num_beams=1, max_length=10, min_length=2)  # fmt: skip
    greedy = greedy_search(make_step(tables), initial_state(5), tables, batch_size=5, bos_id=BOS, eos_id=EOS,
                           max_length=10, min_length=2)  # fmt: skip
    assert [h.tokens for h in beam] == [h.tokens for h in greedy]


def test_beam_beats_greedy_on_a_garden_path() -> None:
    # Token 2 looks best first but is followed by a near-uniform mess; token 3 leads to a certain EOS.
    table = torch.full((5, 5), -10.0)
    table[BOS, 2], table[BOS, 3] = 0.0, -0.3
    table[2, 2:] = 0.0
    table[3, EOS] = 10.0
    table[4, EOS] = 10.0
    tables = table.unsqueeze(0)
    step = make_step(tables)
    greedy = greedy_search(step, initial_state(1), tables, batch_size=1, bos_id=BOS, eos_id=EOS, max_length=6)
    beam = beam_search(
        step, initial_state(1), tables, batch_size=1, bos_id=BOS, eos_id=EOS, num_beams=2, max_length=6
    )
    assert greedy[0].tokens[0] == 2
    assert beam[0].tokens == [3]
    assert beam[0].log_prob > greedy[0].log_prob


def test_min_and_max_length() -> None:
    torch.manual_seed(3)
    tables = torch.randn(2, 6, 6)
    tables[:, :, EOS] += 5.0  # EOS is very likely at every step
    for search in ("beam", "greedy"):
        kwargs = dict(batch_size=2, bos_id=BOS, eos_id=EOS, min_length=5, max_length=8)
        if search == "beam":
            hyps = beam_search(make_step(tables), initial_state(2), tables, num_beams=3, **kwargs)
        else:
            hyps = greedy_search(make_step(tables), initial_state(2), tables, **kwargs)
        assert all(len(h.tokens) == 4 and h.finished for h in hyps)  # 4 words + EOS = min_length
    tables[:, :, EOS] = -1e4  # EOS never wins: stops at max_length with live hypotheses
    hyps = beam_search(make_step(tables), initial_state(2), tables, batch_size=2, bos_id=BOS, eos_id=EOS,
                       num_beams=2, max_length=7)  # fmt: skip
    assert all(len(h.tokens) == 7 and not h.finished for h in hyps)


def test_no_repeat_ngram_blocking() -> None:
    table = torch.full((6, 6), -5.0)
    table[BOS, 2] = 0.0
    table[2, 3] = 0.0  # 2 3 2 3 2 3 ... repeats bigrams and trigrams
    table[3, 2] = 0.0
    tables = table.unsqueeze(0)
    free = beam_search(make_step(tables), initial_state(1), tables, batch_size=1, bos_id=BOS, eos_id=EOS,
                       num_beams=2, max_length=10, min_length=10)  # fmt: skip
    blocked = beam_search(make_step(tables), initial_state(1), tables, batch_size=1, bos_id=BOS, eos_id=EOS,
                          num_beams=2, max_length=10, min_length=10, no_repeat_ngram_size=3)  # fmt: skip
    assert free[0].tokens[:4] == [2, 3, 2, 3]
    trigrams = [tuple(blocked[0].tokens[i : i + 3]) for i in range(len(blocked[0].tokens) - 2)]
    assert len(trigrams) == len(set(trigrams))


def test_ngram_blocking_never_kills_a_hypothesis() -> None:
    # Vocabulary of 2 tokens and unigram blocking: after one step everything is blocked.
    log_probs = torch.log_softmax(torch.randn(2, 2), dim=-1)
    out = NoRepeatNGramProcessor(1)(torch.tensor([[0, 1], [1, 1]]), log_probs)
    assert torch.equal(out[0], log_probs[0])  # all blocked -> unblocked scores kept
    assert torch.isinf(out[1, 1]) and torch.isfinite(out[1, 0])
    tables = torch.zeros(1, 3, 3)
    hyps = beam_search(make_step(tables), initial_state(1), tables, batch_size=1, bos_id=BOS, eos_id=EOS,
                       num_beams=2, max_length=6, min_length=6, no_repeat_ngram_size=1)  # fmt: skip
    assert len(hyps[0].tokens) == 5 and math.isfinite(hyps[0].score)


def test_average_log_probability_ranking() -> None:
    # Finished hypotheses: "2 EOS" (total -1.5, average -0.75) and "3 4 EOS" (total -2.0, average -0.67).
    table = torch.full((5, 5), -30.0)
    table[BOS, 2], table[BOS, 3] = 0.0, 0.0  # -0.69 each
    table[2, EOS], table[2, 2] = 0.0, 0.22  # P(EOS | 2) = 0.445 -> -0.81
    table[3, 4] = 0.0  # certain
    table[4, EOS], table[4, 4] = 0.0, math.log(math.exp(1.31) - 1)  # P(EOS | 4) -> -1.31
    tables = table.unsqueeze(0)

    def no_state(tokens, state, memory):
        return torch.log_softmax(
            per_hypothesis(memory, tokens)[torch.arange(tokens.size(0)), tokens], dim=-1
        ), state

    kwargs = dict(batch_size=1, bos_id=BOS, eos_id=EOS, num_beams=3, max_length=6)
    average = beam_search(no_state, initial_state(1), tables, length_penalty=1.0, **kwargs)[0]
    total = beam_search(no_state, initial_state(1), tables, length_penalty=0.0, **kwargs)[0]
    assert total.tokens == [2]
    assert average.tokens == [3, 4]
    assert total.log_prob > average.log_prob
    assert average.score == pytest.approx(average.log_prob / 3)


def test_processors_check_their_arguments_and_compose_in_order() -> None:
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="min_length must be an integer >= 0"):
            MinLengthProcessor(bad, EOS)
    with pytest.raises(ValueError, match="no_repeat_ngram_size must be an integer >= 1"):
        NoRepeatNGramProcessor(0)
    log_probs = torch.log_softmax(torch.randn(2, 5), dim=-1)
    tokens = torch.tensor([[2, 3], [3, 3]])
    before = log_probs.clone()
    chain = LogitsProcessorList([MinLengthProcessor(4, EOS), NoImmediateRepeatProcessor()])
    out = chain(tokens, log_probs)
    assert torch.equal(log_probs, before)  # inputs are never modified in place
    assert torch.isinf(out[:, EOS]).all() and torch.isinf(out[0, 3]) and torch.isinf(out[1, 3])
    assert torch.isfinite(out[:, [0, 2, 4]]).all()
    assert torch.equal(MinLengthProcessor(3, EOS)(tokens, log_probs), log_probs)  # 2 + 1 >= 3: EOS allowed
    names = [type(p).__name__ for p in build_processors(
        {"min_length": 5, "no_repeat_ngram_size": 3, "no_immediate_repeat": True, "num_beams": 4}, EOS
    )]  # fmt: skip
    assert names == ["MinLengthProcessor", "NoRepeatNGramProcessor", "NoImmediateRepeatProcessor"]
    off = {"min_length": 1, "no_repeat_ngram_size": 0, "no_immediate_repeat": False}
    assert build_processors(off, EOS) == []


def test_a_model_that_prefers_to_repeat_no_longer_does_with_the_ban() -> None:
    """Each token's most likely successor is itself ("architecture architecture ...")."""
    table = torch.full((6, 6), -4.0)
    table[:, 4] = -1.0  # the best other continuation
    table.fill_diagonal_(0.0)
    table[BOS, BOS], table[BOS, 2] = -4.0, 1.0
    tables = table.unsqueeze(0)
    common = dict(batch_size=1, bos_id=BOS, eos_id=EOS, max_length=6)
    free = _greedy_search(make_step(tables), initial_state(1), tables, **common)
    assert free[0].tokens[:2] == [2, 2]
    for ban in (
        LogitsProcessorList([NoImmediateRepeatProcessor()]),
        build_processors({"no_immediate_repeat": True}, EOS),
    ):
        for hyps in (
            _greedy_search(make_step(tables), initial_state(1), tables, processors=ban, **common),
            _beam_search(make_step(tables), initial_state(1), tables, num_beams=3, processors=ban, **common),
        ):
            tokens = hyps[0].tokens
            assert len(tokens) >= 2 and all(a != b for a, b in zip(tokens, tokens[1:], strict=False))


def test_decoder_buffers_follow_the_memory_device() -> None:
    """Every buffer is created on the device of the model's tensors (here: the meta device as a stand-in
    for a GPU, whose tensors must not meet CPU buffers)."""
    from synopsis.generation.penalties import device_of

    assert device_of(None, {"a": [torch.zeros(1, device="meta")]}) == torch.device("meta")
    assert device_of(None, 3) == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_beam_and_greedy_search_on_a_gpu() -> None:  # pragma: no cover - CPU-only CI
    table = torch.log_softmax(torch.randn(6, 6), dim=-1).cuda()

    def step(tokens, state, memory):
        return table[tokens], state + 1

    state = torch.zeros(2, device="cuda")
    beams = beam_search(step, state, None, batch_size=2, bos_id=0, eos_id=1, num_beams=2, max_length=5)
    greedy = greedy_search(step, state, None, batch_size=2, bos_id=0, eos_id=1, max_length=5)
    assert len(beams) == len(greedy) == 2
