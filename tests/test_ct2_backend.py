"""Issue 52: ``--backend ctranslate2`` gives the summaries ``generate()`` gives, from a conversion made once
per weights and cached beside the model, and refuses in one line what it cannot do the same way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import one_line_error, run_cli
from helpers.hub import save_tiny_family
from helpers.tiny_models import save_tiny_bart, save_tiny_led, save_tiny_t5

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.document import Document
from synopsis.errors import SynopsisError
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.decoders import ct2_conversion as ct2

pytest.importorskip("ctranslate2")

DOCUMENTS = [
    Document.from_sentences(
        ["We propose a pointer-generator network for abstractive summarization.", "It copies words."]
    ),
    Document.from_sentences(["Coverage keeps track of what has been summarized so far.", "It helps."]),
    Document.from_sentences(["Short."]),
]
OPTIONS = [
    {},
    {"num_beams": 4, "max_length": 24},
    {"num_beams": 3, "min_length": 8, "max_length": 30, "length_penalty": 2.0, "no_repeat_ngram_size": 2},
    {"num_beams": 1, "max_length": 12, "length_penalty": 0.5},
]


@pytest.fixture(scope="module")
def tokenizers_dir(shared_data: Path) -> Path:
    return shared_data / "tokenizers"


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory: pytest.TempPathFactory, tokenizers_dir: Path) -> Path:
    # a larger init spreads the random model's choices, so summaries end at different lengths
    return save_tiny_bart(tmp_path_factory.mktemp("bart") / "m", tokenizers_dir, init_std=0.3)


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory: pytest.TempPathFactory, tokenizers_dir: Path) -> Path:
    return save_tiny_t5(tmp_path_factory.mktemp("t5") / "m", tokenizers_dir, initializer_factor=3.0)


def _renormalizes(summarizer: Any, decoding: DecodingOptions) -> bool:
    """Whether CTranslate2 renormalizes the beam scores after n-gram bans with these options."""
    settings, _ = summarizer.decoder.settings(decoding)
    return settings["beam_size"] > 1 and settings["no_repeat_ngram_size"] > 0


def _both(model: Path, documents: list[Document] = DOCUMENTS, **options: Any) -> tuple[list[str], list[str]]:
    """Summaries of both backends (``max_source_length`` a setting of the load, the rest decoding options).
    Where CTranslate2 bans no-repeat n-grams under beam search it renormalizes the scores, as
    ``generate(renormalize_logits=True)`` does (issue 52, documented): that is compared."""
    load = {name: options.pop(name) for name in ("max_source_length",) if name in options}
    decoding = DecodingOptions(**options)
    torch_summarizer = load_summarizer(model=model, backend="torch", **load)
    ct2_summarizer = load_summarizer(model=model, backend="ctranslate2", **load)
    if _renormalizes(ct2_summarizer, decoding):  # generate()'s keywords for these options, mapped once
        torch_summarizer.decoder.settings(decoding)["renormalize_logits"] = True
    return (
        torch_summarizer.summarize(documents, decoding=decoding),
        ct2_summarizer.summarize(documents, decoding=decoding),
    )


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("family", ["bart", "t5"])
def test_the_same_summaries_as_generate(family: str, options: dict, bart_dir: Path, t5_dir: Path) -> None:
    torch_side, ct2_side = _both(bart_dir if family == "bart" else t5_dir, **options)
    assert ct2_side == torch_side
    assert len(set(torch_side)) > 1  # the random model does not say one thing whatever it reads


@pytest.mark.parametrize("options", [{}, {"num_beams": 4, "max_length": 24, "min_length": 6}])
@pytest.mark.parametrize("family", ["pegasus", "umt5"])  # helpers.hub's mBART pairs toy ids with GPT-2's BPE
def test_the_same_summaries_on_the_other_stock_families(
    family: str, options: dict, tmp_path_factory: pytest.TempPathFactory, tokenizers_dir: Path
) -> None:
    model = save_tiny_family(family, tmp_path_factory.mktemp(family) / "m", tokenizers_dir)
    torch_side, ct2_side = _both(model, **options)
    assert ct2_side == torch_side


@pytest.mark.parametrize("family", ["pegasus_x", "longt5", "bigbird_pegasus"])
def test_long_input_families_it_cannot_convert_are_refused(
    family: str, tmp_path: Path, tokenizers_dir: Path
) -> None:
    model = save_tiny_family(family, tmp_path / "m", tokenizers_dir)
    with pytest.raises(SynopsisError, match=f"CTranslate2 cannot convert model_type '{family}'"):
        load_summarizer(model=model, backend="ctranslate2")


def test_no_repeat_ngrams_under_beams_renormalize(bart_dir: Path) -> None:
    """The one documented difference: CTranslate2 renormalizes after banning n-grams under beam search; on
    the tiny BART this changes a summary, so the renormalized reference above is not a tautology."""
    options = {"num_beams": 3, "max_length": 30, "no_repeat_ngram_size": 2}
    ct2_side = load_summarizer(model=bart_dir, backend="ctranslate2")
    assert _renormalizes(ct2_side, DecodingOptions(**options))
    assert not _renormalizes(ct2_side, DecodingOptions(num_beams=1, no_repeat_ngram_size=2))
    plain = load_summarizer(model=bart_dir, backend="torch").summarize(
        DOCUMENTS, decoding=DecodingOptions(**options)
    )
    assert plain != _both(bart_dir, **options)[1]


def test_the_checkpoints_generation_config_is_honoured(tmp_path: Path, tokenizers_dir: Path) -> None:
    """A forced first token, early stopping and lengths from generation_config.json as generate() reads
    them."""
    model = save_tiny_bart(tmp_path / "m", tokenizers_dir, init_std=0.3)
    config = json.loads((model / "generation_config.json").read_text())
    config.update(forced_bos_token_id=config["bos_token_id"], num_beams=4, max_length=20, min_length=5,
                  early_stopping=True, no_repeat_ngram_size=3, length_penalty=1.5)  # fmt: skip
    (model / "generation_config.json").write_text(json.dumps(config))
    torch_side, ct2_side = _both(model)
    assert ct2_side == torch_side


def test_by_section_and_sources_are_the_same(bart_dir: Path) -> None:
    document = Document.from_sentences([s.text for d in DOCUMENTS for s in d.sentences])
    torch_side = load_summarizer(model=bart_dir, max_source_length=24, backend="torch")
    torch_side = torch_side.summarize_by_section([document])
    ct2_side = load_summarizer(model=bart_dir, max_source_length=24, backend="ctranslate2")
    assert ct2_side.summarize_by_section([document]) == torch_side


def test_int8_is_an_explicit_compute_type(t5_dir: Path) -> None:
    summarizer = load_summarizer(model=t5_dir, backend="ctranslate2", compute_type="int8")
    assert summarizer.describe().dtype == "int8"
    assert all(isinstance(s, str) for s in summarizer.summarize(DOCUMENTS))


def test_the_conversion_is_cached_reused_and_rebuilt(
    tmp_path: Path, tokenizers_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = save_tiny_t5(tmp_path / "m", tokenizers_dir, initializer_factor=3.0)
    first = ct2.converted_model(model)
    assert first.parent == model / ct2.CACHE_DIR and (first / "model.bin").is_file()

    def no_conversion(*args: object) -> None:
        raise AssertionError("converted again")

    with monkeypatch.context() as patched:  # reused: no second conversion
        patched.setattr(ct2, "_convert", no_conversion)
        assert ct2.converted_model(model) == first
        load_summarizer(model=model, backend="ctranslate2").summarize(DOCUMENTS[:1])
    save_tiny_t5(model, tokenizers_dir, seed=1, initializer_factor=3.0)  # other weights, same folder
    second = ct2.converted_model(model)
    assert second != first and not first.exists()  # rebuilt; the stale copy removed
    torch_side, ct2_side = _both(model)
    assert ct2_side == torch_side  # the new weights, not the cached old ones
    assert not [p for p in second.parent.iterdir() if p.name.startswith(".building-")]


def test_a_failed_conversion_leaves_nothing_half_written(
    tmp_path: Path, tokenizers_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = save_tiny_t5(tmp_path / "m", tokenizers_dir)

    def broken(model_dir: Path, output: Path) -> None:
        output.mkdir()
        (output / "model.bin").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(ct2, "_convert", broken)
    with pytest.raises(KeyboardInterrupt):
        ct2.converted_model(model)
    assert [p.name for p in (model / ct2.CACHE_DIR).iterdir() if p.is_dir()] == []


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "onnx"}, "--backend must be one of auto, torch, ctranslate2"),
        ({"compute_type": "int8"}, "--compute-type applies to --backend ctranslate2"),
        ({"backend": "ctranslate2", "compute_type": "int4"}, "--compute-type must be one of"),
        ({"backend": "ctranslate2", "dtype": "bf16"}, "--dtype applies to --backend torch"),
        ({"backend": "ctranslate2", "method": "lead-3"}, "decodes Hugging Face seq2seq checkpoints"),
        ({"backend": "ctranslate2", "method": "pointer-generator"}, "not pointer-generator"),
    ],
)
def test_what_the_backend_cannot_take_is_one_line(kwargs: dict, message: str, t5_dir: Path) -> None:
    kwargs.setdefault("model", None if "method" in kwargs else t5_dir)
    with pytest.raises(SynopsisError, match=message):
        load_summarizer(**kwargs)


@pytest.mark.parametrize(
    ("model_type", "message"), [("hibrids_bart", "carries HIBRIDS"), ("hie_bart", "carries Hie-BART")]
)
def test_a_checkpoint_with_a_method_is_refused(
    model_type: str, message: str, tmp_path: Path, bart_dir: Path
) -> None:
    model = tmp_path / "m"
    shutil.copytree(bart_dir, model, ignore=shutil.ignore_patterns(ct2.CACHE_DIR))
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    with pytest.raises(SynopsisError, match=message):
        load_summarizer(model=model, backend="ctranslate2")
    assert not (model / ct2.CACHE_DIR).exists()  # refused before any conversion


def test_a_family_ctranslate2_cannot_convert_is_refused(tmp_path: Path, tokenizers_dir: Path) -> None:
    model = save_tiny_led(tmp_path / "led", tokenizers_dir)
    with pytest.raises(SynopsisError, match="CTranslate2 cannot convert model_type 'led'"):
        load_summarizer(model=model, backend="ctranslate2")


@pytest.mark.parametrize(
    ("setting", "name"),
    [({"repetition_penalty": 1.3}, "repetition_penalty"), ({"do_sample": True}, "do_sample"),
     ({"num_return_sequences": 2, "num_beams": 2}, "num_return_sequences")],
)  # fmt: skip
def test_a_generation_setting_it_cannot_honour_is_refused(
    setting: dict, name: str, tmp_path: Path, t5_dir: Path
) -> None:
    model = tmp_path / "m"
    shutil.copytree(t5_dir, model, ignore=shutil.ignore_patterns(ct2.CACHE_DIR))
    config = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**config, **setting}))
    with pytest.raises(SynopsisError, match=f"cannot honour {name}="):
        load_summarizer(model=model, backend="ctranslate2")
    assert not (model / ct2.CACHE_DIR).exists()


# ------------------------------------------------------------------------------------------ the CLI
def test_the_cli_gives_the_same_summary_on_either_backend(
    t5_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "doc.txt"
    document.write_text(" ".join(s.text for d in DOCUMENTS for s in d.sentences) + "\n")
    common = ["summarize", document, "--model", t5_dir, "--num-beams", "2", "--by", "document"]
    code, torch_out, err = run_cli(capsys, *common, "--backend", "torch")
    assert code == 0, err
    code, ct2_out, err = run_cli(capsys, *common, "--backend", "ctranslate2")
    assert code == 0, err
    assert ct2_out == torch_out and torch_out.strip()
    code, _, err = run_cli(capsys, *common, "--backend", "ctranslate2", "--dtype", "bf16")
    one_line_error(code, err, "--dtype applies to --backend torch; ctranslate2 takes --compute-type")


# ------------------------------------------------------------------------------------------ the API
def _post(client: Any, options: dict, model: str = "t5", text: str | None = None) -> Any:
    text = text or " ".join(s.text for d in DOCUMENTS for s in d.sentences)
    return client.post("/v1/summarize", json={"document": text, "model": model, "by": "document",
                                              "options": options})  # fmt: skip


def test_a_request_picks_the_backend_and_batches_apart(
    t5_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``synopsis serve --backend B`` is the default and a request's ``options.backend`` wins (issue 52):
    either backend gives the CLI's summary for the same request, and the batcher keys the two apart."""
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.batching import Batcher
    from synopsis.serve.registry import build_registry

    keys: list[Any] = []
    submit = Batcher.submit
    monkeypatch.setattr(Batcher, "submit", lambda self, *a, **k: keys.append(a[3]) or submit(self, *a, **k))
    document = tmp_path / "doc.txt"
    document.write_text(" ".join(s.text for d in DOCUMENTS for s in d.sentences) + "\n")
    code, out, err = run_cli(capsys, "summarize", document, "--model", t5_dir, "--num-beams", "2", "--by",
                             "document", "--backend", "ctranslate2", "--output-format", "json")  # fmt: skip
    assert code == 0, err
    expected = json.loads(out)["prediction"]
    registry = build_registry({"t5": str(t5_dir)}, builtin=False, warm_up=False, backend="ctranslate2")
    assert registry.get("t5").public()["backend"] == "ctranslate2"  # GET /v1/models: the server's default
    with TestClient(create_app(registry, ServeSettings())) as client:
        asked = ({"num_beams": 2}, {"backend": "torch", "num_beams": 2}, {"backend": "ctranslate2"},
                 {"compute_type": "int8"})  # fmt: skip
        for options in asked:
            response = _post(client, options)
            assert response.status_code == 200, response.text
            if "num_beams" in options:
                assert response.json()["summaries"][0]["summary"] == expected != "", options
    assert [(key.backend, key.compute_type) for key in keys] == [
        ("ctranslate2", "float32"),
        ("torch", None),
        ("ctranslate2", "float32"),
        ("ctranslate2", "int8"),
    ]
    assert keys[0] != keys[1] and keys[0].decoding == keys[1].decoding
    assert "CTranslate2" in registry.get("t5").summarizer.describe().description


def test_what_a_request_cannot_run_on_ctranslate2_is_the_clis_line(
    tmp_path: Path, t5_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused at the edge (422 naming the option), before any conversion, with the line the CLI prints
    for the same choice, the model named rather than its path."""
    from fastapi.testclient import TestClient

    from synopsis.models.seq2seq import convert_checkpoint
    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.registry import build_registry, describe

    hibrids = convert_checkpoint("hibrids", t5_dir, tmp_path / "hibrids")
    registry = build_registry({"h": str(hibrids)}, builtin=False, warm_up=False)
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    document = tmp_path / "doc.txt"
    document.write_text("One sentence here. Another one there.\n")
    capsys.readouterr()  # what the conversion printed
    cases = [
        ("h", {"backend": "ctranslate2"}, ["--model", hibrids, "--backend", "ctranslate2"], "backend"),
        ("lead-3", {"backend": "ctranslate2"}, ["--method", "lead-3", "--backend", "ctranslate2"], "backend"),
        ("h", {"compute_type": "int8"}, ["--model", hibrids, "--compute-type", "int8"], "compute_type"),
    ]  # fmt: skip
    with TestClient(create_app(registry, ServeSettings())) as client:
        for model, options, flags, field in cases:
            response = _post(client, options, model)
            error = response.json()["error"]
            assert response.status_code == 422 and error["field"] == f"options.{field}", response.text
            capsys.readouterr()  # the request's log line
            code, _, err = run_cli(capsys, "summarize", document, *flags)
            line = one_line_error(code, err).removeprefix("error: ")
            assert error["message"] == line.replace(str(hibrids), "model 'h'"), (error, line)
            assert str(tmp_path) not in error["message"]
        bad = _post(client, {"backend": "onnx"}, "h")
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "options.backend"
    assert not (hibrids / ct2.CACHE_DIR).exists()


# ------------------------------------------------------------------------------------------ issue 61
@pytest.mark.parametrize("beams", [1, 4])
@pytest.mark.parametrize("family", ["bart", "t5", "pegasus"])
def test_both_backends_write_the_same_tokens_when_the_minimum_is_the_maximum(
    family: str, beams: int, bart_dir: Path, t5_dir: Path, tmp_path: Path, tokenizers_dir: Path
) -> None:
    """Issue 61, item 4a: at min = max every summary reaches ``--max-length``: the same tokens, as many,
    on both backends (BART and PEGASUS end on a forced EOS, T5 does not)."""
    models = {"bart": bart_dir, "t5": t5_dir}
    model = models.get(family) or save_tiny_family(family, tmp_path / family, tokenizers_dir)
    options = {"num_beams": beams, "min_length": 16, "max_length": 16}
    torch_side, ct2_side = _both(model, **options)
    assert ct2_side == torch_side and all(torch_side)


def _with_generation(source: Path, directory: Path, eos_bias: float = 0.0, **settings: Any) -> Path:
    """A copy of ``source`` with ``settings`` in its generation config, its EOS logit raised by ``eos_bias``
    (so that beams end at different lengths, as a trained model's do)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    shutil.copytree(source, directory, ignore=shutil.ignore_patterns(ct2.CACHE_DIR))
    model = AutoModelForSeq2SeqLM.from_pretrained(directory)
    with torch.no_grad():
        model.final_logits_bias[0, model.config.eos_token_id] += eos_bias
    model.generation_config.update(**settings)
    model.save_pretrained(directory)
    return directory


def test_ctranslate2_ends_beam_search_as_early_stopping_true_does(
    bart_dir: Path, tmp_path: Path, shared_data: Path
) -> None:
    """Issue 61, item 4b: where beams end at different lengths, CTranslate2 writes generate()'s tokens
    under ``early_stopping=True`` and not under generate()'s default (False: it searches on after
    num_beams hypotheses end, CTranslate2 stops); the issue's n-gram case is this one, since banned
    n-grams make beams end early. ``auto`` takes torch there."""
    from synopsis.data.readers import read_corpus

    examples = read_corpus("scitldr", shared_data / "scitldr", split="dev")
    documents = [example.document for _, example in zip(range(12), examples, strict=False)]
    options = {"num_beams": 4, "max_length": 24, "length_penalty": 2.0}
    same = {}
    for early_stopping in (True, False):
        model = _with_generation(
            bart_dir, tmp_path / str(early_stopping), 6.0, num_beams=4, early_stopping=early_stopping
        )
        torch_side = load_summarizer(model=model, backend="torch", max_source_length=48)
        ct2_side = load_summarizer(model=model, backend="ctranslate2", max_source_length=48)
        decoding = DecodingOptions(**options)
        torch_side, ct2_side = (s.summarize(documents, decoding=decoding) for s in (torch_side, ct2_side))
        assert len({len(s.split()) for s in torch_side}) > 3  # beams end at many lengths
        same[early_stopping] = sum(a == b for a, b in zip(torch_side, ct2_side, strict=True))
        chosen = load_summarizer(model=model, max_source_length=48).backend_for(decoding)
        assert chosen == ("ctranslate2" if early_stopping else "torch")
    assert same[True] == len(documents) > same[False]


def test_auto_decodes_on_ctranslate2_exactly_where_it_writes_generates_tokens(
    bart_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 61, item 4: ``--backend auto`` is the default: CTranslate2 for a stock checkpoint when it is
    installed and the options are ones where it writes generate()'s tokens (greedy; beams under
    ``early_stopping=True`` without n-gram blocking), torch otherwise; decided again for another set of
    options, with the same summaries as torch."""
    from synopsis.models.seq2seq import convert_checkpoint
    from synopsis.summarizers.decoders import auto as backends

    model = _with_generation(bart_dir, tmp_path / "stops", early_stopping=True, num_beams=2)
    torch_side = load_summarizer(model=model, backend="torch")
    with caplog.at_level("INFO", logger="synopsis"):
        auto = load_summarizer(model=model)
    assert auto.backend_for(NO_DECODING) == "ctranslate2" and "--backend auto: ctranslate2" in caplog.text
    assert auto.summarize(DOCUMENTS) == torch_side.summarize(DOCUMENTS)
    choices = [
        ({"num_beams": 1, "no_repeat_ngram_size": 2}, "ctranslate2"),
        ({"num_beams": 3}, "ctranslate2"),
        ({"length_penalty": 0.0}, "torch"),
        ({"num_beams": 3, "no_repeat_ngram_size": 2}, "torch"),
    ]
    for options, expected in choices:  # decided per call, for each set of options
        decoding = DecodingOptions(**options)
        assert auto.backend_for(decoding) == expected, options
        assert auto.summarize(DOCUMENTS, decoding=decoding) == torch_side.summarize(
            DOCUMENTS, decoding=decoding
        )
    assert auto.backend_for(DecodingOptions(num_beams=1)) == "ctranslate2"
    beams = DecodingOptions(num_beams=3)
    assert load_summarizer(model=bart_dir).backend_for(beams) == "torch"  # early_stopping False
    assert load_summarizer(model=model, dtype="fp32").describe().backend == "torch"  # --dtype is torch's
    hibrids = convert_checkpoint("hibrids", bart_dir, tmp_path / "hibrids")
    assert load_summarizer(model=hibrids).backend_for(NO_DECODING) == "torch"  # a method CTranslate2 lacks
    monkeypatch.setattr(backends, "ctranslate2_installed", lambda: False)
    assert load_summarizer(model=model).backend_for(NO_DECODING) == "torch"  # without the ct2 extra


def test_autos_choice_is_in_the_run_record_and_the_answer(
    t5_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 61, item 4: what decoded the summaries is in ``--output``'s run record and the API's answer."""
    from fastapi.testclient import TestClient

    from synopsis.cli.provenance import sidecar_path
    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.registry import build_registry

    document = tmp_path / "doc.txt"
    document.write_text(" ".join(s.text for d in DOCUMENTS for s in d.sentences) + "\n")
    records = {}
    runs = {"fast": ["--num-beams", "1"], "ngram": ["--num-beams", "2", "--no-repeat-ngram-size", "2"]}
    for name, flags in runs.items():
        out = tmp_path / f"{name}.jsonl"
        code, _, err = run_cli(capsys, "summarize", document, "--model", t5_dir, *flags, "-o", out,
                               "--output-format", "jsonl")  # fmt: skip
        assert code == 0, err
        records[name] = json.loads(sidecar_path(out).read_text())
    assert records["fast"]["backend"] == "ctranslate2" and "backend" not in records["ngram"]
    registry = build_registry({"t5": str(t5_dir)}, builtin=False, warm_up=False)  # --backend auto
    assert registry.get("t5").public()["backend"] == "auto"  # each answer says which
    with TestClient(create_app(registry, ServeSettings())) as client:
        fast = _post(client, {"num_beams": 1})
        ngram = _post(client, {"num_beams": 2, "no_repeat_ngram_size": 2})
    assert fast.json()["backend"] == "ctranslate2" and ngram.json()["backend"] == "torch"
    expected = json.loads((tmp_path / "fast.jsonl").read_text())["prediction"]
    assert fast.json()["summaries"][0]["summary"] == expected
