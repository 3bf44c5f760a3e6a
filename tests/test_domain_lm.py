"""DomainLM: the attribute-augmented representations, variants, fallback for unseen attributes, save/load."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn import functional as F

from synopsis.errors import CheckpointError
from synopsis.models.domain_lm import DomainLM, DomainLMConfig, attribute_slots_from

SLOTS = ["style=spoken", "style=written", "topic=everyday", "topic=public"]
V, E, H = 40, 8, 12


def make(variant: str, slots: list[str] = SLOTS, seed: int = 0) -> DomainLM:
    torch.manual_seed(seed)
    return DomainLM(DomainLMConfig(V, E, H, dropout=0.0, variant=variant, attribute_slots=slots)).eval()


def baseline_with_shared_weights(model: DomainLM) -> DomainLM:
    """A plain LSTM LM holding only the attribute-shared blocks of ``model``."""
    base = make("baseline", seed=1)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["input_weight"] = state["input_weight"][:0]
    state["output_weight"] = state["output_weight"][:1]
    base.load_state_dict(state)
    return base


def reference_lstm(model: DomainLM) -> torch.nn.LSTM:
    """An ``nn.LSTM`` over the concatenated p'(t), with the paper's U' = [U_0 U_1 ... U_N] as input weight."""
    if not model.config.augment_input:
        return model.lstm
    lstm = torch.nn.LSTM(model.augmented_input_weight().shape[1], H, batch_first=True)
    lstm.weight_ih_l0 = torch.nn.Parameter(model.augmented_input_weight().detach().clone())
    for name in ("weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        setattr(lstm, name, torch.nn.Parameter(getattr(model.lstm, name).detach().clone()))
    return lstm


def reference_logits(
    model: DomainLM,
    ids: torch.Tensor,
    mask: torch.Tensor,
    dropout_mask: torch.Tensor | None = None,
    lstm: torch.nn.LSTM | None = None,
) -> torch.Tensor:
    """The paper's equations written out literally: concatenated p'(t) and h'(t), one big U' and V'.

    ``dropout_mask`` (B, T, E), if given, is applied to p(t) before it is copied into the attribute blocks.
    """
    gate = torch.cat([torch.ones(*mask.shape[:-1], 1), mask], -1)
    p = model.embedding(ids)
    if dropout_mask is not None:
        p = p * dropout_mask
    if model.config.augment_input:
        p = torch.cat([gate[..., i : i + 1] * p for i in range(gate.shape[-1])], -1)
    h, _ = (lstm or reference_lstm(model))(p)
    if model.config.augment_output:
        h = torch.cat([gate[..., i : i + 1] * h for i in range(gate.shape[-1])], -1)
        big_v = torch.cat(list(model.output_weight), dim=1)  # V x (N+1)H
        return F.linear(h, big_v, model.output_bias)
    return F.linear(h, model.output_weight[0], model.output_bias)


@pytest.mark.parametrize("variant", ["in", "out", "in_out"])
def test_no_active_attribute_equals_shared_part_only(variant: str) -> None:
    model = make(variant)
    ids = torch.randint(0, V, (3, 7))
    zero = torch.zeros(3, len(SLOTS))
    expected, _ = baseline_with_shared_weights(model)(ids)
    for mask in (zero, None):
        logits, _ = model(ids, mask)
        torch.testing.assert_close(logits, expected)


@pytest.mark.parametrize("variant", ["in", "out", "in_out"])
def test_augmented_model_matches_the_papers_concatenated_equations(variant: str) -> None:
    model = make(variant)
    ids = torch.randint(0, V, (4, 6))
    # Rows with different attribute sets, one with two, one with none, one changing mid-sequence.
    mask = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.float32)
    per_token = mask.unsqueeze(1).repeat(1, 6, 1)
    per_token[3, 3:] = torch.tensor([0.0, 1.0, 0.0, 1.0])
    logits, _ = model(ids, per_token)
    torch.testing.assert_close(logits, reference_logits(model, ids, per_token))
    # Attributes change the prediction (otherwise the slots would be dead weight).
    other, _ = model(ids, torch.zeros_like(per_token))
    assert not torch.allclose(logits, other)


class _InputDropoutOnly(torch.nn.Module):
    """Stands in for the model's dropout: a fixed mask on p(t) (B, T, E), identity on h(t)."""

    def __init__(self, keep: torch.Tensor) -> None:
        super().__init__()
        self.keep = keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.keep if x.shape == self.keep.shape else x


@pytest.mark.parametrize("variant", ["in", "in_out"])
@pytest.mark.parametrize("rows", ["changing", "constant"])
def test_effective_weight_training_step_matches_concatenated_equations(variant: str, rows: str) -> None:
    """Train mode: one dropout mask on p shared by its copies; same logits and same gradients for U', with a
    row whose domain changes mid-window and with every row in one domain."""
    torch.manual_seed(0)
    model = DomainLM(DomainLMConfig(V, E, H, dropout=0.3, variant=variant, attribute_slots=SLOTS)).train()
    ids, targets = torch.randint(0, V, (4, 6)), torch.randint(0, V, (4, 6))
    mask = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 1]], dtype=torch.float32)
    mask = mask.unsqueeze(1).repeat(1, 6, 1)
    if rows == "changing":
        mask[1, 4:] = torch.tensor([1.0, 0.0, 1.0, 0.0])  # a row whose domain changes mid-window
    keep = (torch.rand(4, 6, E) >= 0.3).float() / 0.7
    model.dropout = _InputDropoutOnly(keep)

    logits, _ = model(ids, mask)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    grad_u = torch.cat([model.lstm.weight_ih_l0.grad, *model.input_weight.grad], dim=1)
    grad_hh = model.lstm.weight_hh_l0.grad.clone()
    grad_embedding = model.embedding.weight.grad.clone()
    model.zero_grad()

    lstm = reference_lstm(model)
    reference = reference_logits(model, ids, mask, dropout_mask=keep, lstm=lstm)
    torch.testing.assert_close(logits, reference)
    F.cross_entropy(reference.flatten(0, 1), targets.flatten()).backward()
    torch.testing.assert_close(grad_u, lstm.weight_ih_l0.grad)
    torch.testing.assert_close(grad_hh, lstm.weight_hh_l0.grad)
    torch.testing.assert_close(grad_embedding, model.embedding.weight.grad)


def test_variant_shapes() -> None:
    n = len(SLOTS)
    shapes = {
        "baseline": ((4 * H, E), (1, V, H)),
        "in": ((4 * H, (n + 1) * E), (1, V, H)),
        "out": ((4 * H, E), (n + 1, V, H)),
        "in_out": ((4 * H, (n + 1) * E), (n + 1, V, H)),
    }
    ids = torch.randint(0, V, (2, 5))
    for variant, (w_ih, w_out) in shapes.items():
        model = make(variant)
        assert tuple(model.augmented_input_weight().shape) == w_ih
        assert tuple(model.lstm.weight_ih_l0.shape) == (4 * H, E)
        assert tuple(model.output_weight.shape) == w_out
        logits, (h, c) = model(ids, torch.ones(2, n))
        assert logits.shape == (2, 5, V) and h.shape == c.shape == (1, 2, H)
    with pytest.raises(ValueError, match="attribute_mask has shape"):
        make("in")(ids, torch.ones(2, n + 1))


def test_any_number_of_attributes_and_no_slots() -> None:
    many = [f"a{i}=v" for i in range(7)]
    model = make("in_out", many)
    logits, _ = model(torch.randint(0, V, (2, 3)), torch.ones(2, 7))
    assert logits.shape == (2, 3, V)
    empty = make("in", [])
    assert empty.config.num_slots == 0
    assert empty(torch.randint(0, V, (1, 4)))[0].shape == (1, 4, V)


def test_unseen_attribute_value_falls_back_to_shared_part_and_warns_once() -> None:
    model = make("in")
    with pytest.warns(UserWarning, match="style=sung.*not seen in training"):
        mask = model.attribute_mask({"style": "sung", "topic": "public"})
    assert mask.tolist() == [0.0, 0.0, 0.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning for the same value would raise here
        assert model.attribute_mask({"style": "sung"}).sum() == 0
        assert model.attribute_mask({}).sum() == 0
    ids = torch.randint(0, V, (1, 5))
    unknown, _ = model(ids, model.attribute_mask({"style": "sung"}).unsqueeze(0))
    shared, _ = baseline_with_shared_weights(model)(ids)
    torch.testing.assert_close(unknown, shared)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="variant"):
        DomainLMConfig(V, variant="both")
    with pytest.raises(ValueError, match="name=value"):
        DomainLMConfig(V, attribute_slots=["spoken"])
    with pytest.raises(ValueError, match="duplicates"):
        DomainLMConfig(V, attribute_slots=["a=b", "a=b"])


def test_slots_one_per_attribute_value() -> None:
    sets = [{"style": "s1", "topic": "t1", "id": "x"}, {"style": "s2", "topic": "t1"}]
    assert attribute_slots_from(sets, ["style", "topic"]) == ["style=s1", "style=s2", "topic=t1"]
    assert attribute_slots_from(sets, ["topic"]) == ["topic=t1"]


def test_save_and_load_round_trip(tmp_path) -> None:
    model = make("in_out")
    ids, mask = torch.randint(0, V, (2, 4)), torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 0]])
    model.save_pretrained(tmp_path / "m", extra={"lowercase": True})
    loaded = DomainLM.from_pretrained(tmp_path / "m").eval()
    assert loaded.config == model.config
    torch.testing.assert_close(loaded(ids, mask)[0], model(ids, mask)[0])
    (tmp_path / "m" / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(CheckpointError, match="corrupt"):
        DomainLM.from_pretrained(tmp_path / "m")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        DomainLM.from_pretrained(tmp_path / "missing")


@pytest.mark.parametrize("variant", ["in", "in_out"])
def test_state_carried_across_windows_keeps_row_order(variant: str) -> None:
    """Rows with different attribute sets run as separate groups; their states must come back in order."""
    model = make(variant)
    ids = torch.randint(0, V, (5, 8))
    mask = torch.tensor(
        [[0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=torch.float32
    )
    expected = reference_logits(model, ids, mask.unsqueeze(1).expand(5, 8, 4))
    whole, (h, c) = model(ids, mask)
    first, state = model(ids[:, :3], mask)
    second, (h2, c2) = model(ids[:, 3:], mask, state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    torch.testing.assert_close((h2, c2), (h, c))
    torch.testing.assert_close(whole, expected)


class PerGroupReference(DomainLM):
    """The previous recurrence (up to commit cc9acc1): rows grouped by attribute combination, time cut where a
    row's combination changes, one ``nn.LSTM`` call per group with U_0 + sum_a m_a U_a as input weight."""

    def _augmented_recurrence(self, x, groups, state):
        from torch.func import functional_call

        from synopsis.models.domain_lm import MaskGroups

        mask = groups.per_token_mask(x.shape[1])
        batch, time = x.shape[:2]
        if state is None:
            zeros = x.new_zeros(1, batch, H)
            state = (zeros, zeros)
        changes = (mask[:, 1:] != mask[:, :-1]).any(dim=-1).any(dim=0).nonzero().flatten()
        bounds = [0, *(changes + 1).tolist(), time]
        pieces = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            groups = MaskGroups.of(mask[:, start])
            blocks = torch.cat([self.lstm.weight_ih_l0.unsqueeze(0), self.input_weight]).flatten(1)
            weights = (groups.stacked_gates() @ blocks).view(-1, *self.lstm.weight_ih_l0.shape).unbind(0)
            xs, hs, cs = (groups.sort(x[:, start:end]), groups.sort(state[0], 1), groups.sort(state[1], 1))
            outs, new_h, new_c = [], [], []
            for w, x_k, h_k, c_k in zip(
                weights,
                xs.split(groups.sizes),
                hs.split(groups.sizes, 1),
                cs.split(groups.sizes, 1),
                strict=True,
            ):
                parameters = {**dict(self.lstm.named_parameters()), "weight_ih_l0": w}
                out, (h_k, c_k) = functional_call(self.lstm, parameters, (x_k, (h_k, c_k)))
                outs.append(out)
                new_h.append(h_k)
                new_c.append(c_k)
            pieces.append(groups.unsort(torch.cat(outs)))
            state = (groups.unsort(torch.cat(new_h, 1), 1), groups.unsort(torch.cat(new_c, 1), 1))
        return torch.cat(pieces, dim=1), state


@pytest.mark.parametrize("variant", ["in", "in_out"])
def test_one_lstm_call_equals_the_per_group_implementation(variant: str) -> None:
    """Same logits, gradients and perplexity as the per-group recurrence it replaced, on a mixed batch with
    domains changing mid-window (per-token masks) and carried state."""
    from synopsis.data.lm_corpus import TokenStream
    from synopsis.training.language_model import perplexity

    model = make(variant)
    reference = PerGroupReference(model.config).eval()
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(0, V, (5, 9))
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0]]).float()
    mask = mask.unsqueeze(1).repeat(1, 9, 1)
    mask[1, 5:] = torch.tensor([0.0, 1.0, 0.0, 1.0])
    mask[4, 2:] = torch.tensor([1.0, 0.0, 0.0, 1.0])
    results = []
    for m in (model, reference):
        m.zero_grad()
        first, state = m(ids[:, :4], mask[:, :4])
        second, _ = m(ids[:, 4:], mask[:, 4:], state)
        logits = torch.cat([first, second], dim=1)
        F.cross_entropy(logits.flatten(0, 1), ids.roll(-1, 1).flatten()).backward()
        results.append((logits, [p.grad.clone() for p in m.parameters()]))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(results[0][1], results[1][1], strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    sets = [{"style": "spoken", "topic": "public"}, {"style": "written", "topic": "everyday"}]
    stream = TokenStream(torch.randint(0, V, (200,)), (torch.arange(200) // 37) % 2, sets)
    for batch_size in (1, 3):
        assert perplexity(model, stream, batch_size, 16) == pytest.approx(
            perplexity(reference, stream, batch_size, 16), rel=1e-5
        )


def test_baseline_does_no_attribute_work() -> None:
    """The baseline ignores a mask entirely: same logits with and without one, and a wrong shape is fine."""
    model = make("baseline")
    ids = torch.randint(0, V, (3, 5))
    torch.testing.assert_close(model(ids, torch.ones(3, 7))[0], model(ids)[0])


@pytest.mark.parametrize("variant", ["in", "in_out"])
def test_both_input_forms_equal_the_concatenated_equations(variant: str) -> None:
    """Fewer combinations than N+1 (one-hot of the combination), more than N+1 (the paper's p'), one, and a
    non-binary mask: all equal the equations written out."""
    model = make(variant)
    ids = torch.randint(0, V, (6, 5))
    many = torch.tensor(
        [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 1], [1, 1, 1, 1]]
    ).float()
    for mask in (many, many[[0, 1, 0, 1, 1, 0]], many[[2] * 6], many * 0.5, many[[3, 3, 1, 1, 1, 4]]):
        expected = reference_logits(model, ids, mask.unsqueeze(1).expand(6, 5, 4))
        torch.testing.assert_close(model(ids, mask)[0], expected)


@pytest.mark.parametrize("variant", ["out", "in_out"])
def test_grouped_output_layer_matches_concatenated_equations_with_gradients(variant: str) -> None:
    """Each group of tokens through its own effective V x H matrix, written into one logits tensor: same
    logits and gradients as h' through V', for groups in runs, interleaved rows, and per-token changes."""
    model = make(variant)
    ids = torch.randint(0, V, (6, 5))
    targets = torch.randint(0, V, (6, 5))
    combos = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]]).float()
    runs = combos[[0, 0, 1, 1, 1, 2]].unsqueeze(1).expand(6, 5, 4)
    interleaved = combos[[1, 0, 1, 2, 0, 0]].unsqueeze(1).expand(6, 5, 4)
    changing = runs.clone()
    changing[2, 3:] = combos[0]
    changing[5, :2] = combos[1]
    for mask in (runs, interleaved, changing):
        grads = []
        for compute in (lambda m=mask: model(ids, m)[0], lambda m=mask: reference_logits(model, ids, m)):
            model.zero_grad()
            logits = compute()
            F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
            grads.append((logits, model.output_weight.grad.clone(), model.output_bias.grad.clone()))
        for ours, reference in zip(*grads, strict=True):
            torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)


def test_mask_groups_runs_interleaved_rows_and_tokens() -> None:
    from synopsis.models.domain_lm import MaskGroups

    a, b, c = [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]
    runs = MaskGroups.of(torch.tensor([a, a, b, c, c]))
    assert runs.sizes == [2, 1, 2] and runs.order is None and runs.index.tolist() == [0, 0, 1, 2, 2]
    assert runs.masks.tolist() == [a, b, c]
    assert runs.over_time(3).sizes == [6, 3, 6] and runs.over_time(3).order is None
    mixed = MaskGroups.of(torch.tensor([b, a, b, a]))
    assert mixed.sizes == [2, 2] and mixed.order.tolist() == [0, 2, 1, 3]
    tokens = mixed.over_time(2)
    assert tokens.sizes == [4, 4] and tokens.order.tolist() == [0, 1, 4, 5, 2, 3, 6, 7]
    x = torch.arange(8.0).view(8, 1)
    torch.testing.assert_close(tokens.unsort(tokens.sort(x)), x)
    per_token = torch.tensor([[a, a, b], [b, b, b]])
    groups = MaskGroups.of(per_token)
    assert groups.shape == (2, 3) and groups.sizes == [2, 4] and groups.order is None
    torch.testing.assert_close(groups.per_token_mask(3), per_token)
    torch.testing.assert_close(runs.per_token_mask(2)[:, 1], torch.tensor([a, a, b, c, c]))


def test_two_layer_lstm_all_input_forms_equal_the_concatenated_equations() -> None:
    """Only the first layer's input is augmented; the other layers run inside the same fused calls."""
    torch.manual_seed(0)
    model = DomainLM(DomainLMConfig(V, E, H, num_layers=2, dropout=0.0, variant="in", attribute_slots=SLOTS))
    model.eval()
    lstm = torch.nn.LSTM((len(SLOTS) + 1) * E, H, num_layers=2, batch_first=True)
    lstm.load_state_dict({**model.lstm.state_dict(), "weight_ih_l0": model.augmented_input_weight()})
    ids = torch.randint(0, V, (4, 6))
    combos = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0]]).float()
    rows = combos[[0, 1, 1, 2]].unsqueeze(1).repeat(1, 6, 1)
    changing = rows.clone()
    changing[0, 3:] = combos[2]
    for mask in (rows, changing, rows[:, 0]):
        per_token = mask.unsqueeze(1).expand(4, 6, 4) if mask.dim() == 2 else mask
        expected = reference_logits(model, ids, per_token, lstm=lstm)
        logits, (h, c) = model(ids, mask)
        torch.testing.assert_close(logits, expected)
        assert h.shape == c.shape == (2, 4, H)


# ----------------------------------------------------------------------------------- mixed precision (GPU)
def _recurrence_inputs(model: DomainLM) -> tuple[torch.Tensor, tuple, torch.Tensor]:
    """Two rows of five tokens through two attribute blocks (U_c1, U_c2): input, zero state, weight_ih."""
    e, h = model.config.embedding_dim, model.config.hidden_dim
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 2 * e, generator=generator)
    zeros = torch.zeros(model.config.num_layers, 2, h)
    return x, (zeros, zeros), torch.cat([model.lstm.weight_ih_l0, model.input_weight[0]], dim=1)


def test_augmented_recurrence_takes_bf16_inputs_with_fp32_weights_as_cuda_autocast_hands_them() -> None:
    """CUDA autocast casts torch.lstm's input to bf16 but not its weight list, so the recurrence gets bf16
    inputs beside fp32 weights (cuDNN: "Weight scalar types do not match"; the CPU kernel refuses the mix
    too). The recurrence runs them in one dtype, the parameters keep fp32 gradients."""
    model = make("in_out")
    x, state, weight_ih = _recurrence_inputs(model)
    reference, _ = model._lstm(x, state, weight_ih)
    output, (h_n, c_n) = model._lstm(x.to(torch.bfloat16), state, weight_ih)
    assert output.dtype == h_n.dtype == c_n.dtype == torch.bfloat16
    torch.testing.assert_close(output.float(), reference, atol=0.05, rtol=0.05)
    output.float().sum().backward()
    assert model.input_weight.grad is not None and model.input_weight.grad.dtype == torch.float32
    # under autocast the weight that comes out of an autocast product is bf16 and the input fp32; on the
    # CPU the recurrence runs in float32 (oneDNN has no bf16 LSTM kernel on many CPUs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = model._lstm(x, state, weight_ih.to(torch.bfloat16))
    assert output.dtype == torch.float32
    torch.testing.assert_close(output, reference, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("variant", ["baseline", "in", "out", "in_out"])
def test_float64_model_with_attributes_stays_float64_and_matches_the_equations(variant: str) -> None:
    """The attribute mask takes the weights' dtype: a float64 model gives float64 logits, equal to the
    concatenated equations in float64 (the mask used to be cast to float32, and the product failed)."""
    model = make(variant).double()
    ids = torch.randint(0, V, (3, 5))
    mask = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0]])
    logits, (h_n, _) = model(ids, mask)
    assert logits.dtype == h_n.dtype == torch.float64
    if variant != "baseline":
        per_token = mask.unsqueeze(1).repeat(1, 5, 1).double()
        expected = reference_logits(model, ids, per_token)
        torch.testing.assert_close(logits, expected, rtol=1e-12, atol=1e-12)


def test_augmented_recurrence_silences_cudnns_contiguous_weights_warning(monkeypatch) -> None:
    """cuDNN warns on every call that the weights are not one buffer (U' is made anew each call, so they
    never are); CPU never warns, so torch.lstm is made to warn as cuDNN does."""
    model = make("in_out")
    x, state, weight_ih = _recurrence_inputs(model)
    lstm = torch.lstm

    def warning_lstm(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        warnings.warn(
            "RNN module weights are not part of single contiguous chunk of memory. This means they need to "
            "be compacted at every call, possibly greatly increasing memory usage.",
            UserWarning,
            stacklevel=2,
        )
        return lstm(*args, **kwargs)

    monkeypatch.setattr(torch, "lstm", warning_lstm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model._lstm(x, state, weight_ih)
        warnings.warn("another warning still shows", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["another warning still shows"]
