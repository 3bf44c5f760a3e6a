"""Issue 58 (hardening, round three): linear-time readers and a CPU budget for parsing, caches that delete
and load only what is theirs, outputs that are never truncated, checkpoint settings range-checked, the hub
cache trusted only within itself and bounded model variants (499s, escaped bidi controls and the connection
room: test_hardening_round3_edges.py). Each test failed before its fix."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.server import lead3_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.data.readers import DOCUMENT_FORMATS, parse_document
from synopsis.document import ParseBudget, parse_budget
from synopsis.errors import InputError

# ----------------------------------------------------------------------------- 1: linear-time readers
# The inputs (and kin): a line of spaces after a numbered heading's text, a run of "[" (the format
# sniffer's link pattern), a token of quotes (the prose test's word pattern), chains of links, long titles.
ATTACKS: dict[str, Callable[[int], str]] = {
    "numbered heading of spaces": lambda n: "Intro text here.\n\n1. A" + " " * n + "b\n",
    "brackets": lambda n: "Some text.\n" + "[" * n,
    "a token of quotes": lambda n: "Hello world.\nFoo bar.\n\n    a" + '"' * n + "x\n",
    "a chain of link starts": lambda n: "Some text.\n" + "[a](http://" * (n // 11),
    "a numbered title of words": lambda n: "1. " + "Abc " * (n // 4) + "\n",
    "a rule": lambda n: "a\n" + "=" * n + "x\n",
    "compiler lines": lambda n: "a\n" + "a.c:" + "1:" * (n // 2) + "\n",
    "markdown backticks": lambda n: "# T\n\n" + "`a" * (n // 2),
    "markdown brackets": lambda n: "# T\n\n" + "[" * n,
}


def _fastest_parse(text: str, repeats: int = 2) -> float:
    times: list[float] = []
    while len(times) < repeats and sum(times) < 0.5:  # a slow one is measured once
        started = time.perf_counter()
        parse_document(text)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_reader_reads_10_times_the_text_in_about_10_times_the_time(name: str) -> None:
    make = ATTACKS[name]
    parse_document("A warm-up. It loads the sentence splitter.\n\n1. Heading\n\nText.")
    small, large = _fastest_parse(make(10_000)), _fastest_parse(make(100_000))
    # linear: ~10 (10-25 measured on a busy machine); quadratic: ~100 (main took 54-105 s at 100 kB)
    assert large < max(small, 0.002) * 45, f"{name}: {small:.4f} s at 10 kB, {large:.4f} s at 100 kB"


# The patterns as they were: the new ones must give the same matches (and groups), only in linear time.
_OLD_PATTERNS = {
    "_RULE": r"^\s*([=\-~*#^+_])\1{2,}\s*$",
    "_NUMBERED": r"^\s{0,4}(\d{1,2}(?:\.\d{1,2}){0,3})\.?\s+(\S.*?)\s*$",
    "_ITEM": r"^\s*(?:[-*+•‣◦▪]|\d{1,3}(?:\.\d{1,3})*[.)])\s+\S",
    "_PROMPT": r"^\s*(?:\$|%|>>>|[A-Z]:\\>)\s+\S",
    "_COMPILER": r"^\s*[\w./+-]+\.\w{1,4}:(?:\d+:)*\s",
    "_TITLED": r"^((?:[A-Z][\w'-]*[ ,]+(?:(?:of|and|or|the|to|for|in|a|an|on|with|by)\s+)*){0,7}"
    r"[A-Z][\w'-]*)\.\s+",
    "_WORD": r"^[\"'(“]*(?:[A-Za-z][A-Za-z'’-]*|\d+)[\"')”]*[,.;:!?]?[\"')”]*$",
}
# (\s of the `regex` module leaves out U+001C-U+001F, which end a line before a pattern sees it)
_PIECES = list(" \t\n\r\x0b\u00a0=-~*#^+_.19aAZ:$%>\\\"'(“)”’,;!?[]•/") + [
    "of ", "an ", "12.", "1.2 ", ">>> ", "C:\\> ", "x.c:", "===", "Table of ", "contents",
]  # fmt: skip

_OLD_ROLE = r"^(?::[\w.:+-]+:)?`(?P<text>.*?)(?:\s*<[^<>]*>)?`(?::[\w.:+-]+:)?$"  # the rst reader's


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*_PIECES, "`", "<t>", ":r:"]), max_size=12).map("".join))
def test_the_linear_patterns_match_as_the_old_ones_did(text: str) -> None:
    from synopsis.data.readers import plaintext, rst

    patterns = [(old, getattr(plaintext, name)) for name, old in _OLD_PATTERNS.items()]
    for old, new in [*patterns, (re.compile(_OLD_ROLE, re.DOTALL), rst._ROLE)]:
        was, now = re.match(old, text), new.match(text)
        assert (was and (was.span(), was.groups())) == (now and (now.span(), now.groups())), (new, text)


def test_the_rst_readers_role_pattern_is_linear() -> None:
    from synopsis.data.readers import rst

    def timed(size: int) -> float:
        started = time.perf_counter()
        rst._ROLE.match(":x:`a" + " " * size + "b`")
        return time.perf_counter() - started

    assert timed(100_000) < max(timed(10_000), 0.001) * 45


def test_the_sniffers_link_pattern_finds_links_as_before() -> None:
    from synopsis.data.readers import sniff_format

    for text in ("See [the docs](https://x.org/a_(b)) now.", "[a [b](#c)", "[x](./y.md)", "```\ncode\n```"):
        assert sniff_format(text) == "markdown", text
    for text in ("[a]\n(https://x)", "[a] (https://x)", "[a](ftp://x)", "[" * 50 + "]"):
        assert sniff_format(text) == "text", text


_FUZZ_TEXT = st.lists(
    st.sampled_from(["\n", "\n\n", " ", "    ", "1. ", "2.1 ", "- ", "# ", "=====", "[a](#b)", "`", "```",
                     "> ", "$ ", "A Title", "word", "Word.", '"', "[", "]", "(", ")", "*", "_", "<b>", "é",
                     "\r\n", "\t", "CONTENTS", "x.c:1: ", "|a|b|", "---"]),  # fmt: skip
    max_size=40,
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_FUZZ_TEXT, st.sampled_from(["auto", "text", "markdown"]))
def test_fuzzed_text_is_read_or_refused_with_a_one_line_input_error(text: str, format_: str) -> None:
    try:
        document, used = parse_document(text, format_)
    except InputError as err:
        assert "\n" not in str(err)
        return
    assert used in DOCUMENT_FORMATS
    assert not document.is_empty()


def test_a_parse_over_its_cpu_budget_stops_with_an_error_naming_the_flag() -> None:
    text = "\n\n".join(f"Paragraph {i} has words. And a second sentence." for i in range(2000))
    budget = ParseBudget(seconds=0.0, flags={"seconds": "--max-parse-seconds"})
    with parse_budget(budget), pytest.raises(InputError, match=r"more than 0 s of CPU.*--max-parse-seconds"):
        parse_document(text, "text")
    assert budget.counted["blocks"] < 2000  # stopped early, not after the whole document


def test_the_cpu_budget_stops_markdowns_inline_parsing_too() -> None:
    budget = ParseBudget(seconds=0.2, flags={"seconds": "--max-parse-seconds"})
    started = time.thread_time()
    with parse_budget(budget), pytest.raises(InputError, match="--max-parse-seconds"):
        parse_document("[" * 200_000, "markdown")  # one paragraph: 2 s of markdown-it's link labels
    assert time.thread_time() - started < 1.0  # stopped inside it (0.2 s measured), not after it


def test_the_service_answers_a_slow_parse_with_a_422_naming_the_flag() -> None:
    from fastapi.testclient import TestClient

    app = lead3_app(max_parse_s=1e-9)
    with TestClient(app, raise_server_exceptions=False) as client:
        text = "\n\n".join(f"Paragraph {i} has words. And a second one." for i in range(300))
        answer = client.post("/v1/outline", json={"document": text})
        assert answer.status_code == 422, answer.text
        assert "--max-parse-seconds" in answer.json()["error"]["message"]
        assert client.get("/health").status_code == 200


# ----------------------------------------------------------------------------- 2: the CTranslate2 cache
@pytest.fixture(scope="module")
def t5_model(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    pytest.importorskip("ctranslate2")
    from helpers.tiny_models import save_tiny_t5

    return save_tiny_t5(tmp_path_factory.mktemp("t5") / "m", shared_data / "tokenizers")


def _copy_model(model: Path, to: Path) -> Path:
    import shutil

    return Path(shutil.copytree(model, to, ignore=shutil.ignore_patterns(".ctranslate2")))


def test_a_symlinked_cache_folder_is_refused_and_its_target_untouched(t5_model: Path, tmp_path: Path) -> None:
    from synopsis.errors import ConfigError
    from synopsis.summarizers.decoders import ct2_conversion as ct2

    model = _copy_model(t5_model, tmp_path / "m")
    victim = tmp_path / "victim"
    for folder in ("photos", "thesis"):
        (victim / folder).mkdir(parents=True)
        (victim / folder / "keep.txt").write_text("mine")
    (model / ct2.CACHE_DIR).symlink_to(victim)
    with pytest.raises(ConfigError, match="symbolic link") as refused:
        ct2.converted_model(model)
    assert "\n" not in str(refused.value)
    assert sorted(p.name for p in victim.iterdir()) == ["photos", "thesis"]


def test_only_conversions_it_made_are_removed_and_a_broken_one_is_made_again(
    t5_model: Path, tmp_path: Path
) -> None:
    import os

    from synopsis.summarizers.decoders import ct2_conversion as ct2

    model = _copy_model(t5_model, tmp_path / "m")
    first = ct2.converted_model(model)
    root = first.parent
    (root / "thesis").mkdir()  # not the tool's: kept
    stale_build = root / ".building-old"
    stale_build.mkdir()
    (stale_build / ct2.MARKER).write_text("{}")
    os.utime(stale_build / ct2.MARKER, (1, 1))  # left by a conversion that died long ago
    fresh_build = root / ".building-now"
    fresh_build.mkdir()
    (fresh_build / ct2.MARKER).write_text("{}")  # another process converting now
    with open(first / "model.bin", "r+b") as handle:  # truncated
        handle.truncate(100)
    again = ct2.converted_model(model)
    assert again == first and (again / "model.bin").stat().st_size > 100
    assert (root / "thesis").is_dir() and fresh_build.is_dir() and not stale_build.exists()
    size = (again / "model.bin").stat().st_size
    (again / "model.bin").write_bytes(os.urandom(size))  # random bytes, same size
    assert ct2.converted_model(model) == again
    from synopsis.summarizers import load_summarizer

    summarizer = load_summarizer(model=model, backend="ctranslate2")
    assert isinstance(summarizer.summarize(["A short document. It has two sentences."])[0], str)


def test_a_hub_snapshot_is_converted_under_the_user_cache(
    t5_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synopsis.summarizers.decoders import ct2_conversion as ct2

    snapshot = _copy_model(t5_model, tmp_path / "hub" / "models--org--tiny" / "snapshots" / ("a" * 40))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    converted = ct2.converted_model(snapshot)
    assert converted.is_relative_to(tmp_path / "user-cache" / "synopsis" / "ctranslate2")
    assert not (snapshot / ct2.CACHE_DIR).exists()


# ----------------------------------------------------------------------------- 3: -o never truncates
def _interrupt_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    """LEAD-k's summaries stop with Ctrl-C at call ``calls`` (the CLI's batches and windows call it)."""
    from synopsis.summarizers.extractive import LeadSummarizer

    made: list[int] = []
    for method in ("summarize", "summarize_windows"):
        original = getattr(LeadSummarizer, method)

        def interrupted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            made.append(1)
            if len(made) >= calls:
                raise KeyboardInterrupt
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(LeadSummarizer, method, interrupted)


def _corpus(path: Path, count: int) -> Path:
    import json

    rows = [
        {"id": f"d{i}", "text": f"Paper {i} studies rivers. It finds bridge {i}. A third one."}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("name", ["out.json", "out.md"])
def test_an_interrupted_run_leaves_a_whole_form_output_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from helpers.cli import run_cli

    corpus = _corpus(tmp_path / "docs.jsonl", 6)
    output = tmp_path / name
    output.write_text("the old results\n")
    _interrupt_after(monkeypatch, 3)
    code, _, err = run_cli(capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-2",
                           "--batch-size", "1", "-o", output)  # fmt: skip
    assert code == 130, err
    assert output.read_text() == "the old results\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert f"{output} is unchanged" in err and "--resume" not in err, err


def test_an_interrupted_by_section_text_run_says_what_it_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.cli import run_cli

    document = tmp_path / "guide.md"
    document.write_text("".join(f"# Part {i}\n\nSection {i} has words. And more.\n\n" for i in range(40)))
    output = tmp_path / "out.txt"
    output.write_text("kept\n")
    _interrupt_after(monkeypatch, 5)
    code, _, err = run_cli(
        capsys, "summarize", document, "--method", "lead-2", "--by", "section", "-o", output
    )
    assert code == 130, err
    assert output.read_text() == "kept\n"
    assert "of 1 predictions" not in err and "--resume" not in err, err


def test_a_finished_whole_form_run_replaces_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from helpers.cli import run_cli

    corpus = _corpus(tmp_path / "docs.jsonl", 3)
    output = tmp_path / "out.json"
    output.write_text("the old results\n")
    code, _, err = run_cli(
        capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-2", "-o", output
    )
    assert code == 0, err
    assert [record["id"] for record in json.loads(output.read_text())] == ["d0", "d1", "d2"]
    assert oct(output.stat().st_mode & 0o777) != oct(0o600)  # a new file's mode, not a temporary's


# ----------------------------------------------------------------------------- 4: a checkpoint's settings
@pytest.fixture(scope="module")
def bart_model(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from helpers.tiny_models import save_tiny_bart

    return save_tiny_bart(tmp_path_factory.mktemp("bart") / "m", shared_data / "tokenizers")


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ('"num_beams": 100000', "num_beams must be a whole number in [1, 64], got 100000"),
        ('"max_length": 1e9', "max_length must be a whole number in [1, 100000], got 1000000000.0"),
        ('"length_penalty": NaN', "length_penalty must be a finite number, got nan"),
        ('"no_repeat_ngram_size": -1', "no_repeat_ngram_size must be a whole number in [0, 1000], got -1"),
        ('"max_new_tokens": 1000000000', "max_new_tokens must be a whole number in [1, 100000]"),
    ],
)
def test_a_checkpoints_generation_setting_out_of_range_is_one_line_naming_file_and_key(
    bart_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, shown: str
) -> None:
    from helpers.cli import one_line_error, run_cli

    model = _copy_model(bart_model, tmp_path / "m")
    (model / "generation_config.json").write_text("{" + setting + ', "decoder_start_token_id": 2}')
    document = tmp_path / "doc.txt"
    document.write_text("Rivers flooded the valley. Three bridges were closed.")
    code, _, err = run_cli(capsys, "summarize", document, "--model", model)
    one_line_error(code, err, "generation_config.json", shown)


def test_a_generation_setting_in_config_json_is_checked_too(bart_model: Path, tmp_path: Path) -> None:
    import json

    from synopsis.errors import CheckpointError
    from synopsis.models.names import read_model_config

    model = _copy_model(bart_model, tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "num_beams": 0}))
    shown = r"config\.json: num_beams must be a whole number in \[1, 64\], got 0"
    with pytest.raises(CheckpointError, match=shown):
        read_model_config(model)


@pytest.mark.parametrize(("name", "megabytes"), [("config.json", 5), ("tokenizer.json", 33)])
def test_oversized_config_and_tokenizer_files_are_refused_before_they_are_parsed(
    bart_model: Path, tmp_path: Path, name: str, megabytes: int
) -> None:
    from synopsis.errors import CheckpointError
    from synopsis.models.seq2seq import load_seq2seq

    model = _copy_model(bart_model, tmp_path / "m")
    filler = "a" * (megabytes * 1024 * 1024)  # valid JSON, so only its size can refuse it
    (model / name).write_text(f'{{"model_type": "bart", "filler": "{filler}"}}')
    started = time.perf_counter()
    with pytest.raises(CheckpointError, match=f"{name}.*(limit|MB a tokenizer file may be)"):
        load_seq2seq(model)
    assert time.perf_counter() - started < 5


# ----------------------------------------------------------------------------- 5: the hub cache's bounds
@pytest.fixture
def hub_cache(tmp_path: Path, bart_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An offline cache with org/good and, beside it, repos whose refs or snapshots reach elsewhere."""
    from helpers.hub import put_in_cache, use_offline_cache

    home = tmp_path / "hf"
    put_in_cache(home, "org/good", bart_model)
    outside = _copy_model(bart_model, tmp_path / "outside")  # a model folder outside the cache
    evil = home / "hub" / "models--org--evil"
    (evil / "refs").mkdir(parents=True)
    (evil / "snapshots").mkdir()
    (evil / "refs" / "main").write_text("../../../../" + str(outside.relative_to(tmp_path)))
    put_in_cache(home, "org/noise", bart_model)
    (home / "hub" / "models--org--noise" / "refs" / "main").write_bytes(bytes(range(256)))
    linked = put_in_cache(home, "org/linked", bart_model)
    import shutil

    shutil.rmtree(linked)
    linked.symlink_to(outside)
    use_offline_cache(monkeypatch, home)
    return home


@pytest.mark.parametrize(
    ("repo_id", "revision", "reason"),
    [
        ("org/evil", None, "refs/main is not a commit id"),
        ("org/noise", None, "refs/main is not a commit id"),
        ("org/linked", None, "is a link out of the cache"),
        ("org/good", "../../x", "not a branch, tag or commit name"),
    ],
)
def test_a_cache_entry_reaching_outside_the_cache_is_refused_in_one_line(
    hub_cache: Path, repo_id: str, revision: str | None, reason: str
) -> None:
    from synopsis.hub import resolve_model

    with pytest.raises(InputError, match=reason) as refused:
        resolve_model(repo_id, revision)
    assert "\n" not in str(refused.value)
    assert resolve_model("org/good").is_relative_to(hub_cache / "hub")


def test_models_lists_the_good_repos_and_says_why_it_skipped_the_others(
    hub_cache: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    import json

    from helpers.cli import run_cli

    code, out, err = run_cli(capsys, "models", "--json")
    assert code == 0, err
    assert [json.loads(line)["repo_id"] for line in out.splitlines()] == ["org/good"], out
    said = err + caplog.text
    for name in ("org/evil", "org/noise", "org/linked"):
        assert f"{name}: skipped" in said, said


# ----------------------------------------------------------------------------- 6: bounded model variants
def test_variants_loaded_for_requests_are_bounded_least_recently_used_first() -> None:
    from synopsis.serve import ModelRegistry, describe
    from synopsis.serve.registry import RequestOptions
    from synopsis.summarizers import load_summarizer

    loads: list[tuple[str, str, str | None]] = []

    def loader_of(name: str) -> Any:
        def load(backend: str, compute_type: str | None) -> Any:
            loads.append((name, backend, compute_type))
            return load_summarizer("lead-3")

        return load

    registry = ModelRegistry()
    first = registry.add(describe("one", load_summarizer("lead-3"), source="user", loader=loader_of("one")))
    second = registry.add(describe("two", load_summarizer("lead-3"), source="user", loader=loader_of("two")))
    registry.limit_variants(2)
    int8, f32 = RequestOptions("ctranslate2", "int8"), RequestOptions("ctranslate2", "float32")
    first.summarizer_for(int8)
    first.summarizer_for(f32)
    first.summarizer_for(int8)  # used again: f32 is now the least recently used
    second.summarizer_for(int8)  # a third variant: one is unloaded
    assert first.loaded(int8) and not first.loaded(f32) and second.loaded(int8)
    assert first.loaded(RequestOptions())  # the server's own backend is never unloaded
    assert len(registry.variants) == 2
    first.summarizer_for(f32)  # loaded again when asked again
    assert loads == [("one", "ctranslate2", "int8"), ("one", "ctranslate2", "float32"),
                     ("two", "ctranslate2", "int8"), ("one", "ctranslate2", "float32")]  # fmt: skip


def test_with_max_variants_0_a_request_gets_only_the_servers_backend(bart_model: Path) -> None:
    pytest.importorskip("ctranslate2")
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, build_registry, create_app

    registry = build_registry(
        {"tiny": bart_model}, builtin=False, warm_up=False, device="cpu", backend="torch"
    )  # the server's backend, not auto's choice: the request asks for the other one
    app = create_app(registry, ServeSettings(max_variants=0, batch_window_ms=0))
    with TestClient(app, raise_server_exceptions=False) as client:
        body = {"document": "Rivers flooded the valley. Three bridges were closed.", "model": "tiny"}
        answer = client.post("/v1/summarize", json={**body, "options": {"backend": "ctranslate2"}})
        assert answer.status_code == 422, answer.text
        assert "--max-variants 0" in answer.json()["error"]["message"]
        assert answer.json()["error"]["field"] == "options.backend"
        assert client.post("/v1/summarize", json=body).status_code == 200
