"""HIBRIDS: relation buckets, biases against naive per-token references, equality with the base models,
generation, real Documents, checkpoints (Cao & Wang, ACL 2022, section 3)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from helpers.models import randomize_tables
from tiny_models import BOS, LED_WINDOW, PAD, bart_config, led_config, t5_config
from torch.nn import functional as F
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    BartForConditionalGeneration,
    LEDForConditionalGeneration,
    T5ForConditionalGeneration,
)

from synopsis.document import Document, Section
from synopsis.models.hibrids import (
    END_NODE,
    FULL_INDEX,
    FULL_OTHER_BUCKET,
    OUTSIDE_NODES,
    QUESTION_NODE,
    START_NODE,
    HibridsBartConfig,
    HibridsBartEncoderAttention,
    HibridsBartForConditionalGeneration,
    HibridsLEDConfig,
    HibridsLEDEncoderSelfAttention,
    HibridsLEDForConditionalGeneration,
    HibridsT5Config,
    HibridsT5EncoderAttention,
    HibridsT5ForConditionalGeneration,
    SelectedRelation,
    add_section_tokens,
    convert_to_hibrids,
    cross_attention_bias,
    document_relation_buckets,
    num_buckets,
    outside_node_relations,
    pad_section_relations,
    pool_by_section,
    relation_buckets,
    section_layout,
    section_marker,
    token_pair_bias,
    window_bias,
    window_index,
)
from synopsis.models.hibrids.bias import fused_pair_bias_fits


# ----------------------------------------------------------------------------- documents and inputs
def two_documents() -> list[Document]:
    """Two section trees: root -> 1 (-> 1.1, 1.2), 2; and root -> 1, 2, 3."""
    a = Document(
        Section(
            children=[
                Section("One", [["a"]], children=[Section("One.1", [["b"]]), Section("One.2", [["c"]])]),
                Section("Two", [["d"]]),
            ]
        )
    )
    b = Document(Section(children=[Section("A", [["e"]]), Section("B", [["f"]]), Section("C", [["g"]])]))
    return [a, b]


def section_ids_for(lengths: list[int], documents: list[Document], width: int) -> torch.Tensor:
    """Per document: BOS and EOS outside any section, the body split into runs over sections 1..S-1,
    and one token in the middle outside any section (a separator), right-padded with -1."""
    rows = []
    for length, doc in zip(lengths, documents, strict=True):
        body = length - 2
        sections = list(range(1, len(doc.sections)))
        ids = [sections[min(i * len(sections) // body, len(sections) - 1)] for i in range(body)]
        ids[body // 2] = -1
        rows.append([-1] + ids + [-1] + [-1] * (width - length))
    return torch.tensor(rows)


def toy_inputs(
    lengths: list[int],
    vocab: int = 64,
    seed: int = 0,
    pad: int = PAD,
    bos: int | None = BOS,
    selected: bool = False,
):
    """Right-padded random token ids with their masks, section ids and padded relation buckets."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(4, vocab, (len(lengths), width), generator=generator)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = pad
        if bos is not None:
            ids[b, 0] = bos
    docs = two_documents()[: len(lengths)]
    section_ids = section_ids_for(lengths, docs, width)
    relations = pad_section_relations([document_relation_buckets(d, selected=selected) for d in docs])
    return ids, mask, section_ids, relations


def naive_pair_bias(weight: torch.Tensor, sections: list[int], relations: torch.Tensor) -> torch.Tensor:
    """(H, L, L) bias looked up pair by pair; a token outside every section (-1) is the root (section 0)."""
    length = len(sections)
    out = torch.zeros(weight.shape[1], length, length, dtype=weight.dtype)
    sections = [max(s, 0) for s in sections]
    for i, si in enumerate(sections):
        for j, sj in enumerate(sections):
            out[:, i, j] = weight[relations[si, sj]]
    return out


# ----------------------------------------------------------------------------- toy models
FAMILIES = {
    "bart": (bart_config, BartForConditionalGeneration),
    "t5": (t5_config, T5ForConditionalGeneration),
    "led": (led_config, LEDForConditionalGeneration),
}


def sharpen(model: torch.nn.Module) -> torch.nn.Module:
    """BART/LED's N(0, 0.02) init makes attention outputs negligible next to the residual stream (tables
    would barely show in the outputs): scale matrices to ~1/sqrt(d_model), queries and keys a bit more
    (peaked attention), and embeddings to logits of order 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                sharp = any(k in name for k in ("q_proj", "k_proj", "query", "key"))
                p.mul_(25.0 if "embed" in name or "shared" in name else 16.0 if sharp else 8.0)
    return model


def stock_model(family: str, attn: str = "eager", seed: int = 0):
    """A random stock model (T5's default init already has attention that matters)."""
    make_config, cls = FAMILIES[family]
    torch.manual_seed(seed)
    model = cls(make_config() if family == "led" else make_config(attn)).eval()
    return model if family == "t5" else sharpen(model)


def family_inputs(family: str, selected: bool = False) -> dict[str, torch.Tensor]:
    """A padded batch of two documents; LED's is several attention windows long with global tokens."""
    if family == "led":
        ids, mask, section_ids, relations = toy_inputs([100, 73], selected=selected)
        glob = torch.zeros_like(ids)
        glob[:, 0] = 1  # BOS (outside any section), as LED is used
        glob[0, 30] = 1  # and one token inside a section, so global rows and columns get a bias too
        extra = {"global_attention_mask": glob}
    elif family == "t5":
        ids, mask, section_ids, relations = toy_inputs([14, 10], pad=0, bos=None, selected=selected)
        extra = {}
    else:
        ids, mask, section_ids, relations = toy_inputs([14, 10], selected=selected)
        extra = {}
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "section_ids": section_ids,
        "section_relations": relations,
        **extra,
    }


def without_sections(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in inputs.items() if not k.startswith("section_")}


# ============================================================================= relation buckets
def test_full_index_set_is_the_papers_419_pairs_plus_one_other_bucket() -> None:
    assert num_buckets() == 420 and FULL_OTHER_BUCKET == 419 and len(FULL_INDEX) == 419
    span = torch.arange(-25, 26)
    path, level = torch.meshgrid(span, span, indexing="ij")  # every pair as a (51, 51) "section" grid
    buckets = relation_buckets(path, level, torch.zeros(len(span)))
    live = (path.abs() <= 19) & (level.abs() <= path.abs()) & ((path - level) % 2 == 0)
    assert int(live.sum()) == 419
    assert sorted(buckets[live].tolist()) == list(range(419))  # one bucket per live pair, all distinct
    assert (buckets[~live] == FULL_OTHER_BUCKET).all()  # |PathLen| > 19 or impossible pairs: no KeyError
    # the authors' numbering: (0, 0) first, then (1, 1), (-1, 1), (1, -1), (-1, -1)
    assert [FULL_INDEX[p] for p in [(0, 0), (1, 1), (-1, 1), (1, -1), (-1, -1)]] == [0, 1, 2, 3, 4]


def test_buckets_of_a_document_follow_its_tree_relations() -> None:
    doc = two_documents()[0]  # root 0; 1 One; 2 One.1; 3 One.2; 4 Two
    buckets = document_relation_buckets(doc)
    path, level = doc.tree_relations()
    for x in range(5):
        for y in range(5):
            assert buckets[x, y] == FULL_INDEX[(int(path[x, y]), int(level[x, y]))]
    assert buckets[1, 2] == FULL_INDEX[(1, 1)] and buckets[2, 1] == FULL_INDEX[(-1, -1)]
    assert buckets[2, 4] == FULL_INDEX[(3, -1)]  # One.1 -> Two: up two, down one, later
    # numpy and torch inputs give the same ids
    depths = [s.depth for s in doc.sections]
    assert torch.equal(relation_buckets(torch.as_tensor(path), torch.as_tensor(level), depths), buckets)


def test_deep_trees_fall_into_the_other_bucket() -> None:
    chain = Section("d1")
    node = chain
    for depth in range(2, 25):  # a 24-deep chain: root -> d1 -> ... -> d24
        node = node.add(Section(f"d{depth}"))
    doc = Document(Section(children=[chain]))
    buckets = document_relation_buckets(doc)
    assert buckets[0, 24] == FULL_OTHER_BUCKET and buckets[24, 0] == FULL_OTHER_BUCKET
    assert buckets[0, 19] == FULL_INDEX[(19, 19)] and buckets[0, 20] == FULL_OTHER_BUCKET


def test_selected_relations_on_a_hand_built_tree() -> None:
    # pre-order: 0 root; 1 s1; 2 s1.1; 3 s1.1.1; 4 s1.2; 5 s1.2.1; 6 s2; 7 s2.1
    doc = Document(
        Section(
            children=[
                Section(
                    "1",
                    children=[
                        Section("1.1", children=[Section("1.1.1")]),
                        Section("1.2", children=[Section("1.2.1")]),
                    ],
                ),
                Section("2", children=[Section("2.1")]),
            ]
        )
    )
    r = SelectedRelation
    got = document_relation_buckets(doc, selected=True)
    assert num_buckets(selected=True) == len(r) == 12
    expected = {
        (3, 3): r.SELF,
        (1, 2): r.CHILD,
        (2, 1): r.PARENT,
        (0, 1): r.CHILD,  # the root is the parent of top-level sections
        (1, 3): r.DESCENDANT,
        (3, 1): r.ANCESTOR,
        (0, 7): r.DESCENDANT,
        (2, 4): r.NEXT_SIBLING,
        (4, 2): r.PREVIOUS_SIBLING,
        (1, 6): r.NEXT_SIBLING,
        (3, 4): r.NEXT_IN_TEXT,  # 1.1.1 -> 1.2: adjacent in the text, not otherwise related
        (4, 3): r.PREVIOUS_IN_TEXT,
        (5, 6): r.NEXT_IN_TEXT,  # 1.2.1 -> 2 crosses top-level sections but is adjacent
        (3, 5): r.LATER_IN_TOP_SECTION,  # 1.1.1 -> 1.2.1, both in section 1
        (5, 2): r.EARLIER_IN_TOP_SECTION,
        (3, 7): r.OTHER,  # 1.1.1 -> 2.1: different top-level sections, far apart
        (7, 2): r.OTHER,
        (2, 6): r.OTHER,  # 1.1 -> 2: uncle, not adjacent
    }
    for (x, y), relation in expected.items():
        assert got[x, y] == relation, (x, y, SelectedRelation(int(got[x, y])).name, relation.name)
    assert set(got.flatten().tolist()) == set(range(12))  # this tree uses every bucket


def test_pad_section_relations_and_layout_checks() -> None:
    rel = pad_section_relations([torch.zeros(2, 2, dtype=torch.long), np.ones((3, 3))])
    assert rel.shape == (2, 3, 3) and rel[0, 2, 2] == -1 and rel[1, 2, 2] == 1
    ids = torch.tensor([[-1, 0, 1, -1], [0, 1, 2, 2]])
    layout = section_layout(ids, rel, length=4, buckets=420)
    assert layout.ids.tolist() == [[0, 0, 1, 0], [0, 1, 2, 2]]  # outside every section -> the root
    assert section_layout(None, None, length=4, buckets=420) is None
    with pytest.raises(ValueError, match="both"):
        section_layout(ids, None, length=4, buckets=420)
    with pytest.raises(ValueError, match="refers to section 3"):
        section_layout(ids.clamp(max=2) + (ids == 2).long(), rel, length=4, buckets=420)
    with pytest.raises(ValueError, match="do not match"):
        section_layout(ids, rel, length=5, buckets=420)
    with pytest.raises(ValueError, match="bucket 421; the table has 420"):
        section_layout(ids, rel + 420, length=4, buckets=420)


# ============================================================================= section markers
def test_section_markers() -> None:
    assert section_marker(1, "sectok") == section_marker(3, "sectok") == "[SEC]"
    assert [section_marker(d, "lvlsectok") for d in (1, 2, 3)] == ["[SEC-L1]", "[SEC-L2]", "[SEC-L3]"]
    with pytest.raises(ValueError, match="depth >= 1"):
        section_marker(0, "lvlsectok")
    with pytest.raises(ValueError, match="unknown section marker kind"):
        section_marker(1, "sec")


@pytest.mark.parametrize("kind", ["sectok", "lvlsectok"])
def test_add_section_tokens_keeps_the_text_tokenization(shared_data, kind: str) -> None:
    from tiny_models import bart_tokenizer

    tokenizer = copy.deepcopy(bart_tokenizer(shared_data / "tokenizers"))  # the cached one stays unchanged
    model = BartForConditionalGeneration(bart_config(vocab_size=len(tokenizer)))
    before = len(tokenizer)
    ids = add_section_tokens(model, tokenizer, kind, max_depth=3)
    assert list(ids) == (["[SEC]"] if kind == "sectok" else ["[SEC-L1]", "[SEC-L2]", "[SEC-L3]"])
    assert len(tokenizer) == before + len(ids) == model.get_input_embeddings().num_embeddings
    assert add_section_tokens(model, tokenizer, kind, max_depth=3) == ids  # idempotent
    marker = section_marker(2, kind)
    plain = tokenizer("The costs rose. Staff fell.", add_special_tokens=False)["input_ids"]
    marked = tokenizer(f"The costs rose. {marker} Staff fell.", add_special_tokens=False)["input_ids"]
    assert marked.count(ids[marker]) == 1
    assert [t for t in marked if t != ids[marker]] == plain


# ============================================================================= bias tensors vs references
def test_token_pair_bias_equals_the_naive_lookup() -> None:
    _, _, section_ids, relations = toy_inputs([14, 10])
    weight = torch.randn(420, 3)
    layout = section_layout(section_ids, relations, length=14, buckets=420)
    got = token_pair_bias(weight, layout)
    for b in range(2):
        expected = naive_pair_bias(weight, section_ids[b].tolist(), relations[b])
        assert torch.equal(got[b], expected)


def test_window_bias_is_the_pair_bias_on_the_band() -> None:
    _, _, section_ids, relations = toy_inputs([40, 33])
    weight = torch.randn(420, 2)
    layout = section_layout(section_ids, relations, length=40, buckets=420)
    one_sided = 5
    band = window_bias(weight, layout.relations, window_index(layout.ids, layout.num_sections, one_sided), 40)
    full = token_pair_bias(weight, layout)
    for i in range(40):
        for d in range(2 * one_sided + 1):
            j = i + d - one_sided
            expected = full[:, :, i, j] if 0 <= j < 40 else torch.zeros(2, 2)
            assert torch.equal(band[:, :, i, d], expected)


@pytest.mark.parametrize("columns", [1, 4])
def test_decoder_bias_in_t_by_s_form_equals_the_naive_sum_over_tokens(columns: int) -> None:
    """Per-head tables (columns = heads, the paper) and shared ones (1 column, older checkpoints)."""
    _, mask, section_ids, relations = toy_inputs([14, 10])
    generator = torch.Generator().manual_seed(3)
    weight = torch.randn(420, columns, generator=generator)
    logits = torch.randn(2, 4, 5, 14, generator=generator).masked_fill(mask[:, None, None, :] == 0, -1e9)
    alpha = logits.softmax(-1)  # (B, H, T, L) previous layer's cross-attention
    layout = section_layout(section_ids, relations, length=14, buckets=420)
    got = cross_attention_bias(pool_by_section(alpha, layout), weight, layout)
    for b in range(2):
        pair = naive_pair_bias(weight, section_ids[b].tolist(), relations[b]).expand(4, 14, 14)  # [h, k, j]
        # bias_tj^h = sum_k alpha_tk^h B[rel(k, j), h]
        expected = torch.einsum("htk,hkj->htj", alpha[b], pair)
        torch.testing.assert_close(got[b], expected, atol=1e-6, rtol=1e-6)
    assert got.shape == (2, 4, 5, 14)


# ============================================================================= attention layers vs references
def random_attention(module: torch.nn.Module, seed: int = 0, std: float = 0.3) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * std)
        module.hibrids_bias.weight.mul_(5.0)  # tables ~N(0, 1.5): visible in the outputs


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_bart_encoder_attention_equals_a_naive_reference(attn: str) -> None:
    config = HibridsBartConfig.from_base(bart_config(attn))
    config._attn_implementation = attn
    module = HibridsBartEncoderAttention(config, layer_idx=0).eval()
    random_attention(module)
    ids, mask, section_ids, relations = toy_inputs([14, 10])
    hidden = torch.randn(2, 14, 32, generator=torch.Generator().manual_seed(5))
    layout = section_layout(section_ids, relations, length=14, buckets=420)
    additive = torch.zeros(2, 1, 14, 14).masked_fill(
        mask[:, None, None, :] == 0, torch.finfo(torch.float32).min
    )
    attention_mask = additive if attn == "eager" else mask[:, None, None, :].bool().expand(2, 1, 14, 14)
    with torch.no_grad():
        got, _ = module(hidden, attention_mask=attention_mask, hibrids_layout=layout)
        for b, n in enumerate(mask.sum(1).tolist()):
            x = hidden[b, :n]
            q, k, v = (
                proj(x).view(n, 4, 8).transpose(0, 1)
                for proj in (module.q_proj, module.k_proj, module.v_proj)
            )
            bias = naive_pair_bias(module.hibrids_bias.weight, section_ids[b, :n].tolist(), relations[b])
            probs = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8) + bias, dim=-1)
            expected = module.out_proj((probs @ v).transpose(0, 1).reshape(n, 32))
            torch.testing.assert_close(got[b, :n], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_t5_encoder_attention_equals_a_naive_reference(attn: str) -> None:
    config = HibridsT5Config.from_base(t5_config(attn))
    config._attn_implementation = attn
    module = HibridsT5EncoderAttention(config, has_relative_attention_bias=True, layer_idx=0).eval()
    random_attention(module)
    _, mask, section_ids, relations = toy_inputs([14, 10], pad=0, bos=None)
    hidden = torch.randn(2, 14, 32, generator=torch.Generator().manual_seed(5))
    layout = section_layout(section_ids, relations, length=14, buckets=420)
    additive = torch.zeros(2, 1, 14, 14).masked_fill(
        mask[:, None, None, :] == 0, torch.finfo(torch.float32).min
    )
    attention_mask = additive if attn == "eager" else mask[:, None, None, :].bool().expand(2, 1, 14, 14)
    with torch.no_grad():
        got, position_bias, _ = module(hidden, mask=attention_mask, hibrids_layout=layout)
        relative = module.compute_bias(14, 14)[0]  # (H, L, L)
        assert torch.equal(position_bias[0], relative)  # later layers reuse the *unbiased* position bias
        for b, n in enumerate(mask.sum(1).tolist()):
            x = hidden[b, :n]
            q, k, v = (proj(x).view(n, 4, 8).transpose(0, 1) for proj in (module.q, module.k, module.v))
            bias = naive_pair_bias(module.hibrids_bias.weight, section_ids[b, :n].tolist(), relations[b])
            probs = torch.softmax(q @ k.transpose(1, 2) + relative[:, :n, :n] + bias, dim=-1)
            expected = module.o((probs @ v).transpose(0, 1).reshape(n, 32))
            torch.testing.assert_close(got[b, :n], expected, atol=1e-5, rtol=1e-5)


def dense_longformer_reference(
    module: HibridsLEDEncoderSelfAttention,
    x: torch.Tensor,
    global_tokens: set[int],
    bias: torch.Tensor,
    global_bias: bool = True,
) -> torch.Tensor:
    """Longformer self-attention of one document (real tokens only), written densely: a token attends to
    keys within the window and to global tokens; a global token attends to every token through the
    global projections. ``bias`` is the (H, n, n) HIBRIDS bias; ``global_bias=False``: it is added on the band
    only (not on global keys' columns nor global queries' rows), as the authors' public code adds it."""
    n, heads, dim = x.shape[0], module.num_heads, module.head_dim
    w = module.one_sided_attn_window_size
    position = torch.arange(n)
    allowed = (position[:, None] - position[None, :]).abs() <= w
    allowed[:, sorted(global_tokens)] = True
    q = (module.query(x) / math.sqrt(dim)).view(n, heads, dim).transpose(0, 1)
    k = module.key(x).view(n, heads, dim).transpose(0, 1)
    v = module.value(x).view(n, heads, dim).transpose(0, 1)
    band_bias, global_rows = bias, bias
    if not global_bias:
        band_bias = bias.clone()
        band_bias[:, :, sorted(global_tokens)] = 0
        global_rows = torch.zeros_like(bias)
    scores = (q @ k.transpose(1, 2) + band_bias).masked_fill(~allowed, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, heads * dim)
    qg = (module.query_global(x) / math.sqrt(dim)).view(n, heads, dim).transpose(0, 1)
    kg = module.key_global(x).view(n, heads, dim).transpose(0, 1)
    vg = module.value_global(x).view(n, heads, dim).transpose(0, 1)
    global_scores = qg @ kg.transpose(1, 2) + global_rows
    out_global = (global_scores.softmax(-1) @ vg).transpose(0, 1).reshape(n, heads * dim)
    for g in global_tokens:
        out[g] = out_global[g]
    return out


@pytest.mark.parametrize("fused", [True, False])
def test_led_encoder_attention_equals_a_dense_reference_on_window_and_global_tokens(
    fused: bool, monkeypatch
) -> None:
    """Both ways the band gets its bias: folded into the band's product (few sections; issue 27 item 7)
    and gathered per band position (more section slots than ``head_dim``)."""
    import synopsis.models.hibrids.led as led_module

    chosen = []

    def choose(layout, head_dim: int) -> bool:
        chosen.append(fused_pair_bias_fits(layout, head_dim))
        return fused

    monkeypatch.setattr(led_module, "fused_pair_bias_fits", choose)
    torch.manual_seed(0)
    model = HibridsLEDForConditionalGeneration(HibridsLEDConfig.from_base(led_config())).eval()
    for layer in model.led.encoder.layers:
        random_attention(
            layer.self_attn.longformer_self_attn, seed=layer.self_attn.longformer_self_attn.layer_id
        )
    inputs = family_inputs("led")
    captured = []

    def hook(module, args, kwargs, output):
        captured.append((module, args[0] if args else kwargs["hidden_states"], output[0]))

    handles = [
        layer.self_attn.longformer_self_attn.register_forward_hook(hook, with_kwargs=True)
        for layer in model.led.encoder.layers
    ]
    with torch.no_grad():
        model.get_encoder()(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            global_attention_mask=inputs["global_attention_mask"],
            section_ids=inputs["section_ids"],
            section_relations=inputs["section_relations"],
        )
        for handle in handles:
            handle.remove()
        assert len(captured) == 2 and captured[0][1].shape[1] % LED_WINDOW == 0  # padded to the window
        for module, hidden, output in captured:
            for b, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
                global_tokens = set(inputs["global_attention_mask"][b, :n].nonzero().flatten().tolist())
                sections = inputs["section_ids"][b, :n].tolist()
                bias = naive_pair_bias(module.hibrids_bias.weight, sections, inputs["section_relations"][b])
                expected = dense_longformer_reference(module, hidden[b, :n], global_tokens, bias)
                torch.testing.assert_close(output[b, :n], expected, atol=1e-5, rtol=1e-5)
    assert chosen and all(chosen)  # these inputs take the fused path by default


def test_decoder_bias_reaches_the_last_cross_attention_as_the_naive_sum() -> None:
    """End to end (eager, attentions returned): the last layer's cross-attention log-probabilities move by
    exactly ``bias_tj = sum_k alpha_tk B[rel(k, j)]`` (up to a per-row constant), alpha = layer N-1's."""
    for family in ("bart", "t5", "led"):
        hibrids = convert_to_hibrids(stock_model(family))
        inputs = family_inputs(family)
        decoder_ids = torch.tensor([[5, 7, 9, 11]] * 2)
        with torch.no_grad():
            plain = hibrids(**inputs, decoder_input_ids=decoder_ids, output_attentions=True)
            randomize_tables(hibrids, which="decoder")
            biased = hibrids(**inputs, decoder_input_ids=decoder_ids, output_attentions=True)
        table = next(p for n, p in hibrids.named_parameters() if "hibrids" in n and "decoder" in n)
        alpha = biased.cross_attentions[-2]
        assert torch.equal(alpha, plain.cross_attentions[-2])  # the layers before are untouched
        for b, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
            pair = naive_pair_bias(
                table.detach(), inputs["section_ids"][b, :n].tolist(), inputs["section_relations"][b]
            )
            assert pair.shape[0] == alpha.shape[1]  # issue 27 item 4: one table column per head
            expected = torch.einsum("htk,hkj->htj", alpha[b, :, :, :n], pair)
            moved = (
                biased.cross_attentions[-1][b, :, :, :n].log() - plain.cross_attentions[-1][b, :, :, :n].log()
            )
            residual = moved - expected
            assert (residual - residual[..., :1]).abs().max() < 1e-4, family
            assert expected.abs().max() > 0.1, family  # the bias is not trivially zero


# ============================================================================= equality with the base models
EQUIVALENCE_CASES = [("bart", "eager"), ("bart", "sdpa"), ("t5", "eager"), ("t5", "sdpa"), ("led", "eager")]


@pytest.mark.parametrize("family,attn", EQUIVALENCE_CASES)
def test_zero_tables_give_the_base_model_forward_and_generate(family: str, attn: str) -> None:
    stock = stock_model(family, attn)
    hibrids = convert_to_hibrids(stock)
    assert hibrids.config._attn_implementation == attn
    tables = [n for n, _ in hibrids.named_parameters() if "hibrids" in n]
    assert len(tables) == 3  # two encoder layers + the last decoder layer
    inputs = family_inputs(family)
    decoder_ids = torch.tensor([[3, 5, 7, 9, 11]] * 2)
    with torch.no_grad():
        expected = stock(**without_sections(inputs), decoder_input_ids=decoder_ids).logits
        got = hibrids(**inputs, decoder_input_ids=decoder_ids).logits
        # Exact under eager; under SDPA the second-to-last cross-attention runs in the eager form (it needs
        # its probabilities and computes them once), so logits of size ~10 differ by float rounding only.
        assert (expected - got).abs().max() <= (1e-6 if attn == "eager" or family == "led" else 1e-5)
        generate = dict(max_new_tokens=6, num_beams=2, do_sample=False)
        expected_ids = stock.generate(**without_sections(inputs), **generate)
        got_ids = hibrids.generate(**inputs, **generate)
        assert torch.equal(expected_ids, got_ids)
        # and the tables do change the model once they are non-zero
        randomize_tables(hibrids)
        changed = hibrids(**inputs, decoder_input_ids=decoder_ids).logits
        assert (expected - changed).abs().max() > 1e-2


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_zero_tables_give_the_base_model_bit_for_bit_in_float64(family: str, use_cache: bool) -> None:
    """Issue 41 item 1: the decoder's last two cross-attentions take their softmax in the input's precision,
    as the stock eager layers do; a float32 softmax left 4.8e-7 (BART) and 4.0e-7 (LED) in float64 logits.
    Issue 51 item 7: without a cache (a training forward) LED's keys are not contiguous, and a 4-D matmul
    rounded differently from stock LED's ``bmm`` (5.6e-15 in these logits); LED now uses ``bmm`` too."""
    stock = stock_model(family).double()
    hibrids = convert_to_hibrids(stock)
    inputs = family_inputs(family)
    decoder = {"decoder_input_ids": torch.tensor([[3, 5, 7, 9, 11]] * 2), "use_cache": use_cache}
    with torch.no_grad():
        expected = stock(**without_sections(inputs), **decoder).logits
        got = hibrids(**inputs, **decoder).logits
    assert got.dtype == torch.float64
    assert torch.equal(expected, got)


def test_tokens_outside_every_section_are_the_root_node_relations_by_hand() -> None:
    """Issue 27 item 3: BOS/EOS (section -1) used to get no bias; as in the authors' public code they are
    the tree's root node. Tree: root (0, depth 0) -> One (1) -> One.1 (2); root -> Two (3)."""
    document = Document(
        Section(
            paragraphs=[["r"]],
            children=[Section("One", [["a"]], children=[Section("One.1", [["b"]])]), Section("Two", [["c"]])],
        )
    )
    relations = document_relation_buckets(document)[None]
    # tokens: BOS (outside), One.1, Two, EOS (outside)
    layout = section_layout(torch.tensor([[-1, 2, 3, -1]]), relations, length=4, buckets=420)
    weight = torch.randn(420, 2)
    bias = token_pair_bias(weight, layout)[0]  # (H, Q, K)
    # (PathLen, LvlDiff) worked out by hand: root -> One.1 two steps down, later in the text: (+2, +2);
    # root -> Two (+1, +1); One.1 -> Two: up 2, down 1, later: (+3, -1); the reverse pairs negate both.
    by_hand = {
        (0, 0): (0, 0), (0, 1): (2, 2), (0, 2): (1, 1), (0, 3): (0, 0),
        (1, 0): (-2, -2), (1, 1): (0, 0), (1, 2): (3, -1), (1, 3): (-2, -2),
        (2, 0): (-1, -1), (2, 1): (-3, 1), (2, 2): (0, 0), (2, 3): (-1, -1),
    }  # fmt: skip
    by_hand.update({(3, j): by_hand[(0, j)] for j in range(4)})  # EOS is the root too
    for (q, k), pair in by_hand.items():
        assert torch.equal(bias[:, q, k], weight[FULL_INDEX[pair]]), (q, k, pair)
    assert not torch.equal(bias[:, 0, 1], torch.zeros(2))  # BOS now gets a bias


def test_outside_nodes_are_the_public_codes_chunks_under_a_virtual_root_by_hand() -> None:
    """Issue 41 item 3: as in the authors' public code, the question, start (BOS) and end (EOS) chunks are
    each a depth-1 node under the virtual root (the document's root): outside -> a top-level section is
    PathLen +-2, LvlDiff 0 (it was +-1, +1 when those tokens were the root itself). Tree: root -> One ->
    One.1; root -> Two. Nodes: question 0, start 1, end 2, root 3, One 4, One.1 5, Two 6."""
    document = Document(
        Section(
            paragraphs=[["r"]],
            children=[Section("One", [["a"]], children=[Section("One.1", [["b"]])]), Section("Two", [["c"]])],
        )
    )
    path, level = document.tree_relations()
    depths = [s.depth for s in document.sections]
    full_path, full_level, full_depth, order = outside_node_relations(path, level, np.array(depths))
    assert (QUESTION_NODE, START_NODE, END_NODE, OUTSIDE_NODES) == (0, 1, 2, 3)
    assert full_depth.tolist() == [1, 1, 1, 0, 1, 2, 1] and order.tolist() == [0, 1, 6, 2, 3, 4, 5]
    by_hand = {
        (START_NODE, 3): (1, -1), (START_NODE, 4): (2, 0), (START_NODE, 5): (3, 1), (START_NODE, 6): (2, 0),
        (QUESTION_NODE, 4): (2, 0), (QUESTION_NODE, START_NODE): (2, 0), (QUESTION_NODE, END_NODE): (2, 0),
        (END_NODE, 3): (-1, -1), (END_NODE, 5): (-3, 1), (END_NODE, START_NODE): (-2, 0),
        (4, START_NODE): (-2, 0), (5, END_NODE): (3, -1), (3, QUESTION_NODE): (-1, 1), (1, 1): (0, 0),
    }  # fmt: skip
    for (x, y), pair in by_hand.items():
        assert (full_path[x, y], full_level[x, y]) == pair, (x, y)
    assert np.array_equal(full_path[3:, 3:], path) and np.array_equal(full_level[3:, 3:], level)
    # through the bias: BOS (start), One.1, Two, EOS (end), an instruction token (question)
    relations = relation_buckets(full_path, full_level, full_depth, order=order)[None]
    layout = section_layout(torch.tensor([[1, 5, 6, 2, 0]]), relations, length=5, buckets=420)
    weight = torch.randn(420, 2)
    bias = token_pair_bias(weight, layout)[0]
    tokens = {(0, 1): (3, 1), (0, 2): (2, 0), (3, 2): (-2, 0), (4, 0): (2, 0), (4, 4): (0, 0)}
    for (q, k), pair in tokens.items():
        assert torch.equal(bias[:, q, k], weight[FULL_INDEX[pair]]), (q, k)
    # HIBRIDS-S: start -> root is child -> parent; start -> One a sibling; the last section -> end is next in
    # the text; question -> start the next sibling (the question comes first)
    selected = relation_buckets(full_path, full_level, full_depth, selected=True, order=order)
    assert selected[START_NODE, 3] == SelectedRelation.PARENT
    assert selected[START_NODE, 4] == SelectedRelation.NEXT_SIBLING
    assert selected[6, END_NODE] == SelectedRelation.NEXT_SIBLING  # (2, 0) outranks next-in-text
    assert selected[END_NODE, 6] == SelectedRelation.PREVIOUS_SIBLING
    assert selected[QUESTION_NODE, START_NODE] == SelectedRelation.NEXT_SIBLING
    assert selected[5, END_NODE] == SelectedRelation.OTHER  # (3, -1), not adjacent, another top section
    assert torch.equal(selected[3:, 3:], relation_buckets(path, level, depths, selected=True))


@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_tokens_outside_any_section_are_the_root(family: str) -> None:
    stock = stock_model(family)
    hibrids = convert_to_hibrids(stock)
    randomize_tables(hibrids)
    inputs = family_inputs(family)
    assert (inputs["section_ids"] == -1).any() and (inputs["section_ids"] > 0).any()
    root = {**inputs, "section_ids": inputs["section_ids"].clamp(min=0)}
    decoder_ids = torch.tensor([[3, 5, 7]] * 2)
    with torch.no_grad():
        expected = stock(**without_sections(inputs), decoder_input_ids=decoder_ids).logits
        got = hibrids(**inputs, decoder_input_ids=decoder_ids).logits
        in_root = hibrids(**root, decoder_input_ids=decoder_ids).logits
        no_inputs = hibrids(**without_sections(inputs), decoder_input_ids=decoder_ids).logits
    assert (got - in_root).abs().max() <= 1e-6
    assert (expected - no_inputs).abs().max() <= 1e-6  # no section inputs at all: the base model


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_eager_and_sdpa_agree_with_nonzero_tables(family: str) -> None:
    """In float64, so that only a different computation (not float32 rounding through the layers: BART's
    fused path differs from eager by up to 2e-5 in float32 logits of size 7) can fail it."""
    inputs = family_inputs(family)
    decoder_ids = torch.tensor([[3, 5, 7, 9]] * 2)
    logits = []
    for attn in ("eager", "sdpa"):
        hibrids = convert_to_hibrids(stock_model(family, attn)).double()
        randomize_tables(hibrids)
        with torch.no_grad():
            logits.append(hibrids(**inputs, decoder_input_ids=decoder_ids).logits)
    torch.testing.assert_close(logits[0], logits[1], atol=1e-10, rtol=1e-10)


def test_fused_bart_encoder_attention_has_the_eager_gradients() -> None:
    """Issue 27 item 7: under sdpa the BART encoder's bias is folded into SDPA's product (the query's row
    of section values against the key's section one-hot); the table's gradient then comes out of the
    widened query. Every parameter's gradient equals the eager computation's, in float64."""
    inputs = family_inputs("bart")
    labels = torch.tensor([[5, 7, 9, 11]] * 2)
    grads = []
    for attn in ("eager", "sdpa"):
        hibrids = convert_to_hibrids(stock_model("bart", attn)).double().train()
        randomize_tables(hibrids)
        hibrids.config.dropout = hibrids.config.attention_dropout = 0.0
        for module in hibrids.modules():
            if hasattr(module, "dropout") and isinstance(module.dropout, float):
                module.dropout = 0.0
        hibrids(**inputs, labels=labels).loss.backward()
        grads.append({n: p.grad for n, p in hibrids.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    assert any("encoder" in n and "hibrids_bias" in n for n in grads[1])
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-10, rtol=1e-8, msg=name)


@pytest.mark.parametrize(("sections", "fused"), [(3, True), (40, False)])
def test_fused_bart_encoder_attention_only_while_the_widening_pays(sections: int, fused: bool) -> None:
    """The fused path widens each head by the section slots (rounded up to 8); past ``head_dim`` slots
    the direct product is cheaper, and is used. Both give the naive reference."""
    config = HibridsBartConfig.from_base(bart_config("sdpa"))
    config._attn_implementation = "sdpa"
    module = HibridsBartEncoderAttention(config, layer_idx=0).eval()
    random_attention(module)
    length = 2 * sections
    generator = torch.Generator().manual_seed(3)
    section_ids = torch.arange(sections).repeat_interleave(2)[None]
    relations = torch.randint(0, 420, (1, sections, sections), generator=generator)
    layout = section_layout(section_ids, relations, length=length, buckets=420)
    assert fused_pair_bias_fits(layout, module.head_dim) is fused
    hidden = torch.randn(1, length, 32, generator=generator)
    with torch.no_grad():
        got, weights = module(hidden, hibrids_layout=layout)
        q, k, v = (proj(hidden[0]).view(length, 4, 8).transpose(0, 1)
                   for proj in (module.q_proj, module.k_proj, module.v_proj))  # fmt: skip
        bias = naive_pair_bias(module.hibrids_bias.weight, section_ids[0].tolist(), relations[0])
        probs = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(8) + bias, dim=-1)
        expected = module.out_proj((probs @ v).transpose(0, 1).reshape(length, 32))
    torch.testing.assert_close(got[0], expected, atol=1e-5, rtol=1e-5)
    assert (weights is None) is fused  # SDPA, as stock, returns no probabilities


@pytest.mark.parametrize("family", ["bart", "led"])
def test_batched_equals_one_document_at_a_time(family: str) -> None:
    hibrids = convert_to_hibrids(stock_model(family))
    randomize_tables(hibrids)
    inputs = family_inputs(family)
    decoder_ids = torch.tensor([[3, 5, 7]] * 2)
    with torch.no_grad():
        batched = hibrids(**inputs, decoder_input_ids=decoder_ids).logits
        for b, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
            size = len(two_documents()[b].sections)
            one = {k: v[b : b + 1, :n] for k, v in inputs.items() if k != "section_relations"}
            one["section_relations"] = inputs["section_relations"][b : b + 1, :size, :size]
            alone = hibrids(**one, decoder_input_ids=decoder_ids[:1]).logits[0]
            torch.testing.assert_close(batched[b], alone, atol=1e-5, rtol=1e-5)


# ============================================================================= generation
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_generate_passes_sections_to_the_encoder_and_every_decoder_step(family: str) -> None:
    hibrids = convert_to_hibrids(stock_model(family))
    randomize_tables(hibrids, std=3.0)
    inputs = family_inputs(family)
    steps = 6
    with torch.no_grad():
        greedy = hibrids.generate(**inputs, max_new_tokens=steps, num_beams=1, do_sample=False)
        # the same greedy search by hand, every step a full forward pass with the section inputs
        start = hibrids.config.decoder_start_token_id
        decoded = torch.full((2, 1), start)
        first_logits = None
        for _ in range(steps):
            logits = hibrids(**inputs, decoder_input_ids=decoded, use_cache=False).logits[:, -1]
            first_logits = logits if first_logits is None else first_logits
            decoded = torch.cat([decoded, logits.argmax(-1, keepdim=True)], dim=1)
        plain = hibrids(**without_sections(inputs), decoder_input_ids=decoded[:, :1]).logits[:, -1]
        assert (plain - first_logits).abs().max() > 1e-2  # the sections matter for this model
        eos = hibrids.generation_config.eos_token_id
        for b in range(2):
            row = greedy[b].tolist()
            n = row.index(eos) + 1 if eos in row[1:] else len(row)
            assert row[:n] == decoded[b, :n].tolist()
        # beam search: sections are expanded per beam; the cached decoder (which reads the second-to-last
        # layer's keys from the cache) and the uncached one (which projects them) agree to the last digit
        beams = dict(max_new_tokens=steps, num_beams=3, do_sample=False, output_scores=True)
        cached = hibrids.generate(**inputs, **beams, use_cache=True, return_dict_in_generate=True)
        uncached = hibrids.generate(**inputs, **beams, use_cache=False, return_dict_in_generate=True)
    assert torch.equal(cached.sequences, uncached.sequences)
    for a, b in zip(cached.scores, uncached.scores, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ============================================================================= real documents
def encode_document(tokenizer, document: Document) -> tuple[list[int], list[int]]:
    """<s> sentence tokens </s>, each sentence token in its section (pre-order index), BOS/EOS in none."""
    ids, sections = [tokenizer.bos_token_id], [-1]
    for sentence in document.sentences:
        pieces = tokenizer(" " + sentence.text, add_special_tokens=False)["input_ids"]
        ids += pieces
        sections += [sentence.section.index] * len(pieces)
    return ids + [tokenizer.eos_token_id], sections + [-1]


def test_flat_and_sectioned_documents_differ_only_with_nonzero_tables(shared_data, tmp_path) -> None:
    from tiny_models import bart_tokenizer, save_tiny_bart

    tokenizer = bart_tokenizer(shared_data / "tokenizers")
    sentences = [
        "The committee met in May.",
        "It reviewed the budget.",
        "Costs rose by ten percent.",
        "Staff numbers fell.",
        "The report ends with advice.",
    ]
    flat = Document.from_sentences(sentences)
    sectioned = Document(
        Section(
            children=[
                Section("Meeting", [sentences[:2]]),
                Section("Findings", [[sentences[2]]], children=[Section("Staff", [[sentences[3]]])]),
                Section("Advice", [[sentences[4]]]),
            ]
        )
    )
    assert [s.text for s in flat.sentences] == [s.text for s in sectioned.sentences]
    stock = BartForConditionalGeneration.from_pretrained(
        save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    )
    hibrids = convert_to_hibrids(sharpen(stock.eval()))
    batch = []
    for doc in (flat, sectioned):
        ids, sections = encode_document(tokenizer, doc)
        batch.append(
            {
                "input_ids": torch.tensor([ids]),
                "section_ids": torch.tensor([sections]),
                "section_relations": document_relation_buckets(doc)[None],
            }
        )
    assert torch.equal(batch[0]["input_ids"], batch[1]["input_ids"])  # the same text
    assert batch[0]["section_relations"].shape == (1, 1, 1) and batch[1]["section_relations"].shape == (
        1,
        5,
        5,
    )
    decoder_ids = torch.tensor([[2, 0, 133, 1080]])
    with torch.no_grad():
        zero = [hibrids(**x, decoder_input_ids=decoder_ids).logits for x in batch]
        randomize_tables(hibrids)
        nonzero = [hibrids(**x, decoder_input_ids=decoder_ids).logits for x in batch]
    assert torch.equal(zero[0], zero[1])
    assert (nonzero[0] - nonzero[1]).abs().max() > 1e-2


# ============================================================================= training
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_gradients_reach_the_tables_and_checkpointing_changes_nothing(family: str) -> None:
    inputs = family_inputs(family)
    labels = torch.tensor([[5, 7, 9, 11]] * 2)
    grads = []
    for checkpointing in (False, True):
        hibrids = convert_to_hibrids(stock_model(family))
        randomize_tables(hibrids)
        hibrids.train()
        if checkpointing:
            hibrids.activation_checkpointing_enable()
        hibrids(**inputs, labels=labels).loss.backward()
        grads.append({n: p.grad.clone() for n, p in hibrids.named_parameters() if p.grad is not None})
    tables = [n for n in grads[0] if "hibrids" in n]
    assert len(tables) == 3 and all(grads[0][n].abs().sum() > 0 for n in tables)
    # the decoder bias also trains the second-to-last layer through its attention weights
    assert set(grads[0]) == set(grads[1])
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-5, rtol=1e-4, msg=name)


# ============================================================================= checkpoints
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_converted_checkpoints_round_trip_through_the_auto_classes(family: str, tmp_path) -> None:
    stock = stock_model(family)
    hibrids = convert_to_hibrids(stock, encoder=family != "t5", decoder=True, selected=family == "led")
    randomize_tables(hibrids)
    hibrids.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == f"hibrids_{family}"
    assert (config.hibrids_encoder, config.hibrids_decoder, config.hibrids_selected) == (
        family != "t5",
        True,
        family == "led",
    )
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert type(loaded) is type(hibrids)
    names = [n for n, _ in loaded.named_parameters() if "hibrids" in n]
    assert len(names) == (1 if family == "t5" else 3)
    assert all(p.shape[0] == num_buckets(family == "led") for n, p in loaded.named_parameters() if n in names)
    inputs = family_inputs(family, selected=family == "led")
    decoder_ids = torch.tensor([[3, 5, 7]] * 2)
    with torch.no_grad():
        a = hibrids(**inputs, decoder_input_ids=decoder_ids).logits
        b = loaded(**inputs, decoder_input_ids=decoder_ids).logits
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_converting_a_real_tiny_checkpoint_keeps_every_weight(shared_data, tmp_path) -> None:
    from tiny_models import save_tiny_led, save_tiny_t5

    for save, cls in (
        (save_tiny_t5, T5ForConditionalGeneration),
        (save_tiny_led, LEDForConditionalGeneration),
    ):
        stock = cls.from_pretrained(save(tmp_path / cls.__name__, shared_data / "tokenizers"))
        hibrids = convert_to_hibrids(stock)
        stock_state, state = stock.state_dict(), hibrids.state_dict()
        assert set(state) - set(stock_state) == {n for n in state if "hibrids" in n}
        assert all(torch.equal(state[n], v) for n, v in stock_state.items())
        assert all(state[n].abs().sum() == 0 for n in state if "hibrids" in n)


def test_converter_refuses_what_it_cannot_convert() -> None:
    bart = stock_model("bart")
    with pytest.raises(ValueError, match="encoder bias, the decoder bias or both"):
        convert_to_hibrids(bart, encoder=False, decoder=False)
    with pytest.raises(ValueError, match="not model_type 'hibrids_bart'"):
        convert_to_hibrids(convert_to_hibrids(bart))
    with pytest.raises(ValueError, match="at least 2 decoder layers"):
        HibridsBartConfig.from_base(bart_config(decoder_layers=1))
    assert not HibridsBartConfig.from_base(
        bart_config(decoder_layers=1), hibrids_decoder=False
    ).hibrids_decoder


def test_a_model_built_from_its_config_starts_with_small_random_tables() -> None:
    config = HibridsBartConfig.from_base(bart_config())
    model = HibridsBartForConditionalGeneration(config)
    tables = [p for n, p in model.named_parameters() if "hibrids" in n]
    assert len(tables) == 3
    values = torch.cat([t.detach().flatten() for t in tables])
    assert 0.01 < values.std() < 0.03  # N(0, 0.02), as the paper initialises them
    t5 = HibridsT5ForConditionalGeneration(HibridsT5Config.from_base(t5_config()))
    t5_values = torch.cat([p.detach().flatten() for n, p in t5.named_parameters() if "hibrids" in n])
    assert 0.01 < t5_values.std() < 0.03  # not T5's default std of 1.0 for embeddings


def test_led_pads_section_ids_like_its_input() -> None:
    """An input one token past a window multiple: the padded positions get no section."""
    hibrids = convert_to_hibrids(stock_model("led"))
    randomize_tables(hibrids)
    ids, mask, section_ids, relations = toy_inputs([LED_WINDOW * 3 + 1])
    with torch.no_grad():
        out = hibrids.get_encoder()(
            input_ids=ids, attention_mask=mask, section_ids=section_ids, section_relations=relations
        )
    assert out.last_hidden_state.shape[1] == ids.shape[1]
    assert torch.isfinite(out.last_hidden_state).all()


# ============================================================================= issue 27 item 4
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_decoder_table_is_per_head_and_older_shared_tables_still_load(family: str, tmp_path) -> None:
    """The paper's decoder table has one column per head. A checkpoint saved before (a (buckets, 1) table,
    no ``hibrids_decoder_per_head`` in its config) loads as the shared table it was and computes as before."""
    import json

    hibrids = convert_to_hibrids(stock_model(family))
    heads = 4
    decoder_tables = [p for n, p in hibrids.named_parameters() if "hibrids" in n and "decoder" in n]
    assert [tuple(p.shape) for p in decoder_tables] == [(420, heads)]
    assert hibrids.config.hibrids_decoder_per_head

    # an "old" checkpoint: shared decoder table, config without the new key
    config_class = type(hibrids.config)
    old_config = config_class.from_base(hibrids.config, hibrids_decoder_per_head=False)
    old = type(hibrids)(old_config).eval()
    shared = {k: v for k, v in hibrids.state_dict().items() if not ("hibrids" in k and "decoder" in k)}
    old.load_state_dict(shared, strict=False)
    randomize_tables(old)
    old.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    del saved["hibrids_decoder_per_head"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    attn = {} if family == "led" else {"attn_implementation": "eager"}
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, **attn).eval()
    assert not loaded.config.hibrids_decoder_per_head
    table = next(p for n, p in loaded.named_parameters() if "hibrids" in n and "decoder" in n)
    assert tuple(table.shape) == (420, 1)
    inputs = family_inputs(family)
    decoder_ids = torch.tensor([[3, 5, 7]] * 2)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(**inputs, decoder_input_ids=decoder_ids).logits,
            old(**inputs, decoder_input_ids=decoder_ids).logits,
        )


@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_second_to_last_cross_attention_is_computed_once(family: str) -> None:
    """It used to run the stock attention, then project the queries again and recompute its probabilities."""
    hibrids = convert_to_hibrids(stock_model(family))
    layers = {
        "bart": lambda m: m.model.decoder.layers[-2].encoder_attn.q_proj,
        "t5": lambda m: m.decoder.block[-2].layer[1].EncDecAttention.q,
        "led": lambda m: m.led.decoder.layers[-2].encoder_attn.q_proj,
    }
    calls = []
    handle = layers[family](hibrids).register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        hibrids(**family_inputs(family), decoder_input_ids=torch.tensor([[3, 5, 7]] * 2))
    handle.remove()
    assert len(calls) == 1


def test_section_inputs_are_checked_without_reading_device_values() -> None:
    """No ``int(ids.max())``: on a device whose values cannot be read (meta here; on a GPU that read is a
    host sync per layer and breaks ``torch.compile``) the layout and the bias functions still run."""
    _, _, section_ids, relations = toy_inputs([14, 10])
    layout = section_layout(section_ids.to("meta"), relations.to("meta"), length=14, buckets=420)
    assert layout.ids.device.type == "meta"
    weight = torch.zeros(420, 4, device="meta")
    assert token_pair_bias(weight, layout).shape == (2, 4, 14, 14)
    alpha = torch.zeros(2, 4, 3, 14, device="meta")
    assert cross_attention_bias(pool_by_section(alpha, layout), weight, layout).shape == (2, 4, 3, 14)
    with pytest.raises(ValueError, match="refers to section"):  # CPU tensors still get the exact error
        section_layout(section_ids + 5, relations, length=14, buckets=420)


def test_biased_bart_layers_do_not_fall_back_to_sdpa_with_a_float_mask(monkeypatch) -> None:
    """Issue 27 item 7: a float bias that needs a gradient sent SDPA to its math path (plus a "safe softmax"
    over every score matrix). The biased encoder layers now fold the bias into SDPA's product (a widened
    query and key, no float mask); the last cross-attention computes its attention directly."""
    hibrids = convert_to_hibrids(stock_model("bart", "sdpa"))
    randomize_tables(hibrids)
    calls = []
    original = F.scaled_dot_product_attention

    def counting(query, key, value, attn_mask=None, *args, **kwargs):
        calls.append(attn_mask is not None and attn_mask.dtype != torch.bool and attn_mask.requires_grad)
        return original(query, key, value, attn_mask, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    hibrids.train()
    hibrids(**family_inputs("bart"), labels=torch.tensor([[5, 7, 9]] * 2)).loss.backward()
    assert calls and not any(calls)  # no SDPA call with a trainable float mask


# ============================================================================= issue 51 item 4
@pytest.mark.parametrize("per_head", [True, False])
@pytest.mark.parametrize("family", ["bart", "t5", "led"])
def test_decoder_table_per_head_or_shared_as_the_public_code_in_float64(family: str, per_head: bool) -> None:
    """The decoder table: one column per head (the default; the paper: "each head maintains its own lookup
    table") or one column shared by the heads (``decoder_per_head=False``; the public code's
    ``nn.Embedding(600, 1)``, added to every head h weighted by head h of the previous layer). In float64 the
    last cross-attention's log-probabilities move by exactly ``bias_tj^h = sum_k alpha_tk^h B[rel(k, j), h or
    0]`` (up to a per-row constant)."""
    hibrids = convert_to_hibrids(stock_model(family), decoder_per_head=per_head).double()
    assert hibrids.config.hibrids_decoder_per_head is per_head
    table = next(p for n, p in hibrids.named_parameters() if "hibrids" in n and "decoder" in n)
    assert tuple(table.shape) == (420, 4 if per_head else 1)
    inputs = family_inputs(family)
    decoder_ids = torch.tensor([[5, 7, 9, 11]] * 2)
    with torch.no_grad():
        plain = hibrids(**inputs, decoder_input_ids=decoder_ids, output_attentions=True)
        randomize_tables(hibrids, which="decoder", native=True)
        biased = hibrids(**inputs, decoder_input_ids=decoder_ids, output_attentions=True)
    alpha = biased.cross_attentions[-2]
    for b, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
        sections = inputs["section_ids"][b, :n].tolist()
        pair = naive_pair_bias(table.detach(), sections, inputs["section_relations"][b]).expand(4, n, n)
        expected = torch.einsum("htk,hkj->htj", alpha[b, :, :, :n], pair)
        moved = biased.cross_attentions[-1][b, :, :, :n].log() - plain.cross_attentions[-1][b, :, :, :n].log()
        residual = moved - expected
        assert (residual - residual[..., :1]).abs().max() < 1e-12
        assert expected.abs().max() > 0.1
        if not per_head:  # one value per relation: heads differ only by their previous-layer weights
            assert torch.equal(pair[0], pair[3])


@pytest.mark.parametrize("global_bias", [True, False])
def test_led_global_tokens_biased_as_the_paper_or_band_only_as_the_public_code_in_float64(
    global_bias: bool,
) -> None:
    """LED's global tokens: by default their rows and columns get the encoder bias too (the paper's equation
    adds it to every score); ``global_bias=False`` adds it on the sliding band only, as the public code
    (``hierarchical_bias/modeling_led.py`` adds the chunked bias to the band scores only). Each equals a
    dense float64 reference of that choice, and the two choices differ. The tolerance is the float32
    rounding of Longformer's own softmax (it takes it in float32 for float64 inputs too: 7e-7 here)."""
    model = convert_to_hibrids(stock_model("led"), global_bias=global_bias).double()
    assert model.config.hibrids_global_bias is global_bias
    for layer in model.led.encoder.layers:
        attention = layer.self_attn.longformer_self_attn
        random_attention(attention, seed=attention.layer_id)
    inputs = family_inputs("led")
    captured = []

    def hook(module, args, kwargs, output):
        captured.append((module, args[0] if args else kwargs["hidden_states"], output[0]))

    handles = [
        layer.self_attn.longformer_self_attn.register_forward_hook(hook, with_kwargs=True)
        for layer in model.led.encoder.layers
    ]
    with torch.no_grad():
        outputs = model.get_encoder()(**inputs).last_hidden_state
    for handle in handles:
        handle.remove()
    assert outputs.dtype == torch.float64 and len(captured) == 2
    for module, hidden, output in captured:
        for b, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
            global_tokens = set(inputs["global_attention_mask"][b, :n].nonzero().flatten().tolist())
            assert len(global_tokens) >= 1
            sections = inputs["section_ids"][b, :n].tolist()
            bias = naive_pair_bias(module.hibrids_bias.weight, sections, inputs["section_relations"][b])
            expected = dense_longformer_reference(module, hidden[b, :n], global_tokens, bias, global_bias)
            torch.testing.assert_close(output[b, :n], expected, atol=2e-6, rtol=0)
            other = dense_longformer_reference(module, hidden[b, :n], global_tokens, bias, not global_bias)
            assert (other - expected).abs().max() > 1e-3  # the choice matters on these inputs


def test_band_only_is_refused_where_there_are_no_global_tokens() -> None:
    with pytest.raises(ValueError, match="only LED has global tokens"):
        convert_to_hibrids(stock_model("bart"), global_bias=False)
