"""Models named by their Hugging Face hub id, read from huggingface_hub's own cache (offline here).

The cache is laid out as the hub leaves it (``models--ORG--NAME/refs/main`` -> ``snapshots/<hash>/``) with
tiny random models (BART, PEGASUS, LongT5, a T5 whose config names a summarization prefix), each with its
own generation settings (tests/helpers/hub.py); ``HF_HOME`` points at it and ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers.cli import one_line_error, run_cli
from helpers.hub import (
    GENERATION,
    T5_PREFIX,
    build_hub_cache,
    put_in_cache,
    save_tiny_family,
    use_offline_cache,
)
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from synopsis.errors import CheckpointError, InputError, SynopsisError
from synopsis.hub import resolve_model

FAMILIES = ["tiny-org/bart-sum", "tiny-org/pegasus-sum", "tiny-org/long-t5-sum", "tiny-org/t5-prefix"]
TEXT = (
    "Rivers flooded the valley after a week of rain. Bridges were closed and schools sent pupils home. "
    "Engineers expect the water to fall by Friday."
)
MAX_INPUT = 96  # the tiny tokenizers' own model_max_length


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    home = tmp_path_factory.mktemp("hf_home")
    build_hub_cache(home, shared_data / "tokenizers", max_input=MAX_INPUT)
    return home


@pytest.fixture
def hub(hub_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``HF_HOME`` at the tiny cache, offline (:func:`helpers.hub.use_offline_cache`)."""
    use_offline_cache(monkeypatch, hub_home)
    return hub_home


def _generate(snapshot: Path, text: str, **options: object) -> str:
    """What a Hugging Face user gets: the checkpoint's own prefix, tokenizer truncation and generation
    config (``options`` added as generate() takes them)."""
    model = AutoModelForSeq2SeqLM.from_pretrained(snapshot).eval()
    tokenizer = AutoTokenizer.from_pretrained(snapshot)
    params = getattr(model.config, "task_specific_params", None) or {}
    prefix = (params.get("summarization") or {}).get("prefix", "")
    with torch.inference_mode():
        output = model.generate(**tokenizer(prefix + text, truncation=True, return_tensors="pt"), **options)
    return tokenizer.decode(output[0], skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()


def _snapshot(hub: Path, repo_id: str) -> Path:
    return resolve_model(repo_id)


# ---------------------------------------------------------------------------- every family, its defaults
@pytest.mark.parametrize("repo_id", FAMILIES)
def test_a_hub_name_summarizes_as_generate_does_with_the_checkpoints_own_defaults(
    hub: Path, repo_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synopsis.data.readers import read_document
    from synopsis.summarizers import load_summarizer

    document = tmp_path / "flood.txt"
    document.write_text(TEXT + "\n")
    snapshot = _snapshot(hub, repo_id)
    expected = _generate(snapshot, TEXT)
    assert expected  # the generation config's min_length: never empty
    summarizer = load_summarizer(model=repo_id, device="cpu")
    doc = read_document(document)
    tokenizer = AutoTokenizer.from_pretrained(snapshot)
    prefix = T5_PREFIX if repo_id == "tiny-org/t5-prefix" else ""
    (encoding,) = summarizer.inputs.encode_sources([doc])
    assert encoding.input_ids == tokenizer(prefix + TEXT, truncation=True)["input_ids"]
    assert summarizer.summarize([doc]) == [expected]
    code, out, err = run_cli(capsys, "summarize", document, "--model", repo_id)
    assert code == 0, err
    assert out.strip() == expected
    assert summarizer.input_capacity() == MAX_INPUT - summarizer.SPECIAL_TOKEN_ROOM  # the model's own input


@pytest.mark.parametrize("repo_id", ["tiny-org/bart-sum", "tiny-org/pegasus-sum"])
def test_the_tokenizer_reads_the_text_as_written(
    hub: Path, repo_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 61, item 1: with two spaces after each sentence (and a line break inside one) the CLI,
    the library and the service gave BART other ids than ``tokenizer(text)``: the sentences were re-joined
    with one space. A byte-level BPE encodes every space; the tokenizer sees the text as written."""
    from fastapi.testclient import TestClient

    from synopsis.pipeline import read_source
    from synopsis.serve import ServeSettings, build_registry, create_app
    from synopsis.summarizers import load_summarizer

    snapshot = _snapshot(hub, repo_id)
    tokenizer = AutoTokenizer.from_pretrained(snapshot)
    sentences = [s.rstrip(".") + "." for s in TEXT.split(". ")]
    broken = sentences[0] + "  " + sentences[1].replace(" were ", " were\n")  # a line break inside
    texts = ["  ".join(sentences), "  ".join(sentences[:2]), "   ".join(sentences * 4), broken,
             "\t ".join(sentences[1:])]  # fmt: skip
    summarizer = load_summarizer(model=repo_id, device="cpu")
    registry = build_registry({"m": snapshot}, builtin=False, warm_up=False, device="cpu")
    with TestClient(create_app(registry, ServeSettings())) as client:
        for i, text in enumerate(texts):
            document = tmp_path / f"spaced{i}.txt"
            document.write_text(text + "\n")
            expected = _generate(snapshot, text)
            (encoding,) = summarizer.inputs.encode_sources([read_source(document).document])
            assert encoding.input_ids == tokenizer(text, truncation=True)["input_ids"], text
            code, out, err = run_cli(capsys, "summarize", document, "--model", repo_id, "--by", "document")
            assert code == 0, err
            assert out.strip() == expected, text
            assert summarizer.summarize([text]) == [expected]
            body = {"document": text, "model": "m", "by": "document"}
            answer = client.post("/v1/summarize", json=body)
            assert answer.status_code == 200 and answer.json()["summaries"][0]["summary"] == expected


def test_by_section_each_window_is_read_as_written(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 61, item 1, by section: each window's text is its section's as the file writes it."""
    from synopsis.pipeline import SummarizeRunner
    from synopsis.summarizers import load_summarizer

    bodies = {name: "  ".join([TEXT.replace(". ", ".  ")] * 2) for name in ("Rain", "Roads")}
    bodies["Roads"] = bodies["Roads"].replace(" were ", " were\n")
    document = tmp_path / "spaced.md"
    document.write_text("".join(f"# {name}\n\n{body}\n\n" for name, body in bodies.items()))
    summarizer = load_summarizer(model="tiny-org/bart-sum", device="cpu")
    read: list[str] = []
    encode = summarizer.inputs.encode_sources

    def spy(documents: list, instructions: object = None) -> object:
        read.extend(summarizer.inputs.source_text(d) for d in documents)
        return encode(documents, instructions)

    monkeypatch.setattr(summarizer.inputs, "encode_sources", spy)
    (summary,) = SummarizeRunner(summarizer, by="section").run(document)
    assert read == list(bodies.values()) and len(summary.result.sections) == 2


def test_a_flag_the_user_sets_wins_over_the_checkpoints_generation_config(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "flood.txt"
    document.write_text(TEXT + "\n")
    snapshot = _snapshot(hub, "tiny-org/bart-sum")
    code, out, err = run_cli(
        capsys, "summarize", document, "--model", "tiny-org/bart-sum", "--num-beams", "1", "--max-length", "9"
    )
    assert code == 0, err
    assert out.strip() == _generate(snapshot, TEXT, num_beams=1, max_length=9 + 1)  # 9 summary tokens
    assert GENERATION["num_beams"] != 1 and GENERATION["max_length"] != 9


@pytest.mark.parametrize("repo_id", FAMILIES)
def test_a_long_document_by_section_cites_each_sections_own_sentences(
    hub: Path, repo_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sections = ["Rain", "Roads", "Schools"]
    body = "\n\n".join(f"# {name}\n\n" + " ".join([TEXT] * 2) for name in sections)
    document = tmp_path / "long.md"
    document.write_text(body + "\n")
    code, out, err = run_cli(
        capsys, "summarize", document, "--model", repo_id, "--by", "section", "--output-format", "json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert [s["heading"] for s in result["sections"]] == sections
    for index, section in enumerate(result["sections"]):
        assert section["summary"], section
        for sentence in section["summary"]:
            assert sentence["sources"] and all(s["path"] == [index] for s in sentence["sources"]), sentence


@pytest.mark.parametrize("model_type", ["mbart", "pegasus_x", "bigbird_pegasus", "umt5"])
def test_the_other_stock_families_summarize_by_section_with_windows_of_their_own_input(
    model_type: str, tmp_path: Path, shared_data: Path
) -> None:
    from synopsis.config import DecodingOptions
    from synopsis.data.readers import read_document
    from synopsis.summarizers import load_summarizer

    model = save_tiny_family(model_type, tmp_path / model_type, shared_data / "tokenizers")
    summarizer = load_summarizer(model=model, device="cpu")
    assert summarizer.describe().method == "seq2seq"
    document = tmp_path / "long.md"
    document.write_text("\n\n".join(f"# Part {i}\n\n" + " ".join([TEXT] * 6) for i in range(3)) + "\n")
    doc = read_document(document)
    (encoding,) = summarizer.inputs.encode_sources([doc])
    assert len(encoding.input_ids) == summarizer.inputs.max_source_length < encoding.length_before_truncation
    (result,) = summarizer.summarize_by_section([doc], decoding=DecodingOptions(max_length=6))
    assert len(result.sections) == 3 and all(section.summary for section in result.sections)
    for index, section in enumerate(result.sections):
        for sentence in section.summary:
            assert sentence.sources and all(source.path == (index,) for source in sentence.sources)


# ---------------------------------------------------------------------------- every place a model is named
def test_convert_hibrids_and_a_training_step_from_a_hub_name(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_data: Path
) -> None:
    out = tmp_path / "hibrids"
    code, _, err = run_cli(capsys, "convert", "hibrids", "tiny-org/bart-sum", out)
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["model_type"] == "hibrids_bart"
    code, out, err = run_cli(capsys, "train", "seq2seq", "--model", "tiny-org/long-t5-sum", "--dry-run")
    assert code == 0 and "longt5" in out, err  # the memory plan from the cached config.json
    corpus = tmp_path / "train.jsonl"
    rows = [{"id": str(i), "text": TEXT, "summary": "Rivers flooded the valley."} for i in range(4)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys, "-q", "train", "seq2seq", "--model", "tiny-org/t5-prefix", "--revision", "main",
        "--train", corpus, "--corpus", "jsonl", "--output", run, "--max-steps", "1", "--eval-every", "1",
        "--batch-size", "4", "--set", "max_dev_examples=2", "--set", "eval_max_length=4",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((run / "best" / "config.json").read_text())["model_type"] == "t5"


def test_the_service_offers_a_hub_named_model_with_the_clis_answer(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, build_registry, create_app, parse_model_spec

    name, directory = parse_model_spec("pegasus=tiny-org/pegasus-sum@main")
    assert directory == _snapshot(hub, "tiny-org/pegasus-sum")
    registry = build_registry({name: directory}, builtin=False, warm_up=False, device="cpu")
    with TestClient(create_app(registry, ServeSettings())) as client:
        response = client.post("/v1/summarize", json={"document": TEXT, "model": "pegasus", "by": "document"})
    assert response.status_code == 200, response.text
    document = tmp_path / "flood.txt"
    document.write_text(TEXT + "\n")
    code, out, err = run_cli(capsys, "summarize", document, "--model", "tiny-org/pegasus-sum")
    assert code == 0, err
    assert response.json()["summaries"][0]["summary"] == out.strip()


def test_a_local_directory_of_the_same_name_wins_and_a_revision_is_its_own_snapshot(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "tiny-org" / "bart-sum"
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_model("tiny-org/bart-sum") == Path("tiny-org/bart-sum")
    pegasus = _snapshot(hub, "tiny-org/pegasus-sum")
    other = put_in_cache(hub, "tiny-org/bart-sum", pegasus, revision="v2")
    local.rmdir()
    assert resolve_model("tiny-org/bart-sum", "v2") == other != resolve_model("tiny-org/bart-sum")


def test_the_library_sorts_many_documents_by_length_into_batches_as_the_cli_batches(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 61, item 5: one ``summarize()`` call of 20 documents padded them all to the longest in one
    call; it makes calls of at most 16 (the CLI's batch), longest first, each padded to its own, with the
    CLI's summaries."""
    from synopsis.summarizers import load_summarizer

    sentences = TEXT.split(". ")
    texts = [". ".join(sentences[: 1 + i % 3]) + ". " + "More rain fell. " * (i % 7) for i in range(20)]
    summarizer = load_summarizer(model="tiny-org/bart-sum", device="cpu")
    widths: list[list[int]] = []
    generate = summarizer.model.generate

    def spy(**kwargs: object) -> object:
        mask = kwargs["attention_mask"]
        widths.append([int(mask.shape[1]), *mask.sum(dim=1).tolist()])
        return generate(**kwargs)

    monkeypatch.setattr(summarizer.model, "generate", spy)
    library = summarizer.summarize(texts)
    assert [len(w) - 1 for w in widths] == [16, 4]
    assert min(widths[0][1:]) >= max(widths[1][1:])  # the longest first, so each call pads to its own
    assert widths[1][0] == max(widths[1][1:]) < widths[0][0]
    widths.clear()
    assert summarizer.summarize(texts, batch_size=20) == library and len(widths) == 1  # as asked: one call
    corpus = tmp_path / "texts.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)))
    code, out, err = run_cli(
        capsys, "summarize", "--corpus", "jsonl", corpus, "--model", "tiny-org/bart-sum", "--by", "document",
        "--output-format", "jsonl",
    )  # fmt: skip
    assert code == 0, err
    assert [json.loads(line)["prediction"] for line in out.splitlines()] == library


def test_a_hub_name_without_an_organisation_resolves_as_huggingface_hub_does(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 61, item 2: ``t5-small``, as model cards and papers write the hub's canonical models, is found
    in the cache as ``models--t5-small`` in every place a model is named; a local directory still wins."""
    from synopsis.serve import parse_model_spec
    from synopsis.summarizers import load_summarizer

    snapshot = put_in_cache(hub, "t5-small", _snapshot(hub, "tiny-org/t5-prefix"))
    document = tmp_path / "flood.txt"
    document.write_text(TEXT + "\n")
    assert resolve_model("t5-small") == snapshot
    code, out, err = run_cli(capsys, "summarize", document, "--model", "t5-small")
    assert code == 0, err
    assert out.strip() == _generate(snapshot, TEXT)
    assert load_summarizer(model="t5-small", device="cpu").summarize([TEXT]) == [out.strip()]
    assert parse_model_spec("small=t5-small") == ("small", snapshot)
    code, out, err = run_cli(capsys, "train", "seq2seq", "--model", "t5-small", "--dry-run")
    assert code == 0 and "t5" in out, err
    absent = run_cli(capsys, "summarize", document, "--model", "t5-absent")
    one_line_error(absent[0], absent[2], "t5-absent", "offline")
    one_line_error(*run_cli(capsys, "summarize", document, "-m", "lead-3")[::2], "-m is --model")
    local = tmp_path / "t5-small"
    shutil.copytree(_snapshot(hub, "tiny-org/bart-sum"), local)
    monkeypatch.chdir(tmp_path)
    assert resolve_model("t5-small") == Path("t5-small")  # a local directory of that name wins


# ---------------------------------------------------------------------------- refusals, one line each
def test_hub_names_that_cannot_be_used_are_one_line_errors(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "flood.txt"
    document.write_text(TEXT + "\n")

    def error(*args: str) -> tuple[int, str]:
        code, _, err = run_cli(capsys, "summarize", document, *args)
        return code, err

    one_line_error(*error("--model", "tiny-org/absent"), "tiny-org/absent", "offline mode is on")
    one_line_error(*error("--model", "tiny-org/bart-sum", "--revision", "v9"), "revision 'v9'", "offline")
    one_line_error(*error("--model", "tiny-org/bert-encoder"), "model_type 'bert'", "not a supported seq2seq")
    one_line_error(*error("--model", "tiny-org/pickled"), "pytorch_model.bin", "not loaded")
    one_line_error(*error("--model", "tiny-org/indexed"), "maps weights to pytorch_model.bin", "--revision")
    one_line_error(*error("--revision", "main"), "--revision main", "--model")


def test_online_errors_name_the_model_and_an_unreachable_hub_falls_back_to_the_cache(
    hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    response = httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co/api/models/x"))

    def raising(error: Exception):
        def model_info(*args: object, **kwargs: object) -> None:
            raise error

        return model_info

    monkeypatch.setattr(HfApi, "model_info", raising(RevisionNotFoundError("no rev", response=response)))
    with pytest.raises(InputError, match=r"tiny-org/bart-sum: no revision 'v9' on the hub"):
        resolve_model("tiny-org/bart-sum", "v9")
    monkeypatch.setattr(HfApi, "model_info", raising(RepositoryNotFoundError("no repo", response=response)))
    with pytest.raises(InputError, match=r"tiny-org/absent: no such model on the hub"):
        resolve_model("tiny-org/absent")
    monkeypatch.setattr(HfApi, "model_info", raising(httpx.ConnectError("[Errno 111] Connection refused")))
    with pytest.raises(InputError, match=r"tiny-org/absent: cannot download it .*Connection refused"):
        resolve_model("tiny-org/absent")
    assert resolve_model("tiny-org/bart-sum") == _snapshot(hub, "tiny-org/bart-sum")  # cached: used


def test_a_safetensors_index_naming_a_pickle_is_refused_and_nothing_is_unpickled(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 50, item 3: transformers would load a ``.bin`` an index names with ``torch.load``."""
    import shutil

    from synopsis.models.seq2seq import load_seq2seq

    model = tmp_path / "indexed"
    shutil.copytree(_snapshot(hub, "tiny-org/bart-sum"), model, symlinks=False)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("a pickle was loaded"))
    weights = (model / "model.safetensors").read_bytes()
    (model / "model.safetensors").unlink()
    (model / "pytorch_model.bin").write_bytes(weights)
    index = {"metadata": {}, "weight_map": {"model.shared.weight": "pytorch_model.bin"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="maps weights to pytorch_model.bin") as caught:
        load_seq2seq(model)
    assert "\n" not in str(caught.value)
    # an index of safetensors shards loads (the same weights, sharded)
    sharded = tmp_path / "sharded"
    AutoModelForSeq2SeqLM.from_pretrained(_snapshot(hub, "tiny-org/bart-sum")).save_pretrained(
        sharded, max_shard_size="1MB"
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(_snapshot(hub, "tiny-org/bart-sum") / name, sharded)
    assert (sharded / "model.safetensors.index.json").is_file()
    loaded, _ = load_seq2seq(sharded)
    assert loaded.config.model_type == "bart"


def test_a_revision_without_a_hub_name_is_refused(hub: Path, tmp_path: Path) -> None:
    from synopsis.summarizers import load_summarizer

    with pytest.raises(SynopsisError, match="revision 'main'"):
        load_summarizer(revision="main")
    with pytest.raises(InputError, match="is a local directory"):
        resolve_model(tmp_path, "main")


# ---------------------------------------------------------------------------- what the default's note names
def test_the_defaults_note_names_a_pretrained_checkpoint_with_its_download_or_its_cache(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synopsis.document import Document, Section
    from synopsis.summarizers.pretrained import BART_LARGE_CNN, abstractive_hint

    short = Document(Section(paragraphs=[[TEXT]]))
    parts = [Section(heading=f"Part {i}", paragraphs=[[TEXT] * 40]) for i in range(3)]
    long = Document(Section(children=parts))
    hint = abstractive_hint(short)
    assert "name the pretrained model facebook/bart-large-cnn (news summaries; about 1.6 GB" in hint
    assert "section by section" not in hint and "section by section" in abstractive_hint(long)
    from huggingface_hub import constants

    bart = _snapshot(hub, "tiny-org/bart-sum")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # a cache of its own
    put_in_cache(tmp_path, BART_LARGE_CNN.repo_id, bart)
    assert "model facebook/bart-large-cnn (news summaries; in your cache)" in abstractive_hint(short)


def test_synopsis_models_lists_the_cached_models_it_can_run(
    hub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "models", "--json")
    assert code == 0, err
    listed = {row["repo_id"]: row for row in map(json.loads, out.splitlines())}
    assert set(FAMILIES) <= set(listed)
    assert not {"tiny-org/bert-encoder", "tiny-org/pickled", "tiny-org/indexed"} & set(listed)
    pegasus, long_t5 = listed["tiny-org/pegasus-sum"], listed["tiny-org/long-t5-sum"]
    assert pegasus["family"] == "pegasus" and pegasus["methods"] == [] and pegasus["size_bytes"] > 0
    assert long_t5["model_type"] == "longt5" and long_t5["family"] == "t5"
    code, out, err = run_cli(capsys, "models")
    assert code == 0 and "tiny-org/bart-sum  main  bart (bart)" in out and "3 other cached" in out


# ---------------------------------------------------------------------------- downloads (the hub faked)
def test_a_download_fetches_config_tokenizer_and_safetensors_only_after_checking_the_repo(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online, a repo's file list is read first (a pickle-only repo is refused with nothing downloaded),
    then its config.json (a BERT is refused before its weights), then the rest, without pickles."""
    from types import SimpleNamespace

    import huggingface_hub
    from huggingface_hub import HfApi, constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    calls: list[tuple[str, dict]] = []
    repos = {
        "org/bart": (_snapshot(hub, "tiny-org/bart-sum"), ["config.json", "model.safetensors", "x.h5"]),
        "org/bert": (_snapshot(hub, "tiny-org/bert-encoder"), ["config.json", "model.safetensors"]),
        "org/pickles": (_snapshot(hub, "tiny-org/pickled"), ["config.json", "pytorch_model.bin"]),
    }

    def model_info(self: object, repo_id: str, revision: str | None = None) -> SimpleNamespace:
        files = repos[repo_id][1]
        return SimpleNamespace(sha="c0ffee", siblings=[SimpleNamespace(rfilename=f) for f in files])

    def hf_hub_download(repo_id: str, filename: str, **kwargs: object) -> str:
        calls.append((filename, kwargs))
        return str(repos[repo_id][0] / filename)

    def snapshot_download(repo_id: str, **kwargs: object) -> str:
        calls.append(("snapshot", kwargs))
        return str(repos[repo_id][0])

    monkeypatch.setattr(HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    from synopsis.models.names import resolve_seq2seq

    with pytest.raises(CheckpointError, match="org/pickles: weights only in pytorch_model.bin"):
        resolve_seq2seq("org/pickles")
    assert calls == []
    with pytest.raises(CheckpointError, match="model_type 'bert'"):
        resolve_seq2seq("org/bert")
    assert [name for name, _ in calls] == ["config.json"]
    calls.clear()
    assert resolve_seq2seq("org/bart", "v1", progress=False) == repos["org/bart"][0]
    (_, config), (_, snapshot) = calls
    assert config["revision"] == snapshot["revision"] == "c0ffee"  # the commit the file list came from
    from fnmatch import fnmatch

    def fetched(name: str) -> bool:
        return any(fnmatch(name, pattern) for pattern in snapshot["allow_patterns"])

    needed = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "spiece.model"]
    assert all(map(fetched, needed))
    assert not any(map(fetched, ["pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.onnx"]))
    assert snapshot["tqdm_class"](total=1).disable  # progress=False: no bars


def test_download_bars_only_on_a_terminal_never_with_quiet_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging
    import sys

    from synopsis.cli.models import show_download_progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    logging.getLogger("synopsis").setLevel(logging.INFO)
    assert show_download_progress() and not show_download_progress(json_output=True)
    logging.getLogger("synopsis").setLevel(logging.ERROR)  # synopsis -q
    assert not show_download_progress()
    logging.getLogger("synopsis").setLevel(logging.INFO)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not show_download_progress()


def test_hf_home_alone_points_a_fresh_process_at_the_cache(hub_home: Path) -> None:
    """No patching: huggingface_hub reads ``HF_HOME`` when the command starts, as transformers does."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_HUB_CACHE")}
    env.update(HF_HOME=str(hub_home), HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).parents[1] / "src"))
    listed = subprocess.run(
        [sys.executable, "-m", "synopsis", "models"], env=env, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0 and "tiny-org/pegasus-sum  main  pegasus (pegasus)" in listed.stdout
