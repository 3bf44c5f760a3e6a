"""Where models compute: ``device=`` / ``--device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``), one GPU per
process under a launch, and every input a summarizer makes on its model's device.

No GPU here: the inputs are checked on the ``meta`` device (shapes only). A summarizer whose model is on
``meta`` must hand the model meta tensors; one made on the CPU and not moved shows up as ``cpu``. The model
is stopped at its first call (nothing can be computed on ``meta``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.fakes import fake_gpus

from synopsis.config import DecodingOptions
from synopsis.devices import compute_device, resolve_device
from synopsis.document import Document
from synopsis.errors import InputError

META = torch.device("meta")


def test_auto_is_a_gpu_when_torch_sees_one_else_the_cpu(monkeypatch) -> None:
    fake_gpus(monkeypatch, 0)
    assert resolve_device("auto") == resolve_device(None) == resolve_device("CPU") == torch.device("cpu")
    fake_gpus(monkeypatch, 2)
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device(META) == META  # a torch.device is taken as it is
    with compute_device("cpu"):  # what auto means inside a command that builds its models deep inside
        assert resolve_device("auto") == torch.device("cpu")
        assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("auto") == torch.device("cuda", 0)


def test_a_launch_keeps_one_gpu_per_process(monkeypatch) -> None:
    fake_gpus(monkeypatch, 2)
    monkeypatch.setenv("WORLD_SIZE", "4")
    for rank, gpu in ((0, 0), (1, 1), (3, 1)):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", gpu)


@pytest.mark.parametrize(
    ("spec", "gpus", "message"),
    [
        ("cuda", 0, "--device cuda: torch sees no CUDA GPU on this machine; use --device cpu or auto"),
        ("cuda:2", 2, "--device cuda:2: this machine has 2 GPU(s), cuda:0 to cuda:1"),
        ("gpu", 1, "--device 'gpu' is not a device; use auto"),
        ("mps", 1, "--device mps: synopsis computes on cpu or cuda, not mps"),
    ],
)
def test_an_unusable_device_is_a_one_line_input_error(
    monkeypatch: pytest.MonkeyPatch, spec: str, gpus: int, message: str
) -> None:
    fake_gpus(monkeypatch, gpus)
    with pytest.raises(InputError) as caught:
        resolve_device(spec)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    with pytest.raises(InputError), compute_device(spec):
        pass


def test_load_summarizer_refuses_an_unusable_device_before_reading_weights(monkeypatch, tmp_path) -> None:
    from synopsis.summarizers import load_summarizer

    fake_gpus(monkeypatch, 0)
    with pytest.raises(InputError, match="torch sees no CUDA GPU"):
        load_summarizer("pointer-generator", device="cuda")
    with pytest.raises(InputError, match="torch sees no CUDA GPU"):
        load_summarizer("seq2seq", tmp_path / "no-such-model", device="cuda")


def test_summarizers_say_where_they_run(caplog) -> None:
    from synopsis.summarizers import load_summarizer

    with caplog.at_level("INFO", logger="synopsis"):
        summarizer = load_summarizer("pointer-generator", device="cpu")
        info = summarizer.describe()
        assert (info.device, info.dtype) == ("cpu", "float32")
        assert "model runs on" not in caplog.text  # said when it computes, not when it is loaded
        summarizer.summarize(["The model reads this sentence.", "And this one."])
    assert caplog.text.count("model runs on cpu (float32)") == 1  # once, at the first call
    assert load_summarizer("lead-3").describe().device is None


@pytest.mark.parametrize(
    ("flags", "warned"),
    [({"avx2", "avx512f"}, {"bf16", "fp16"}), ({"avx512f", "avx512_bf16", "amx_bf16"}, {"fp16"}),
     ({"avx512_fp16", "amx_bf16"}, set()), ({"asimd", "bf16"}, {"fp16"})],
)  # fmt: skip
def test_half_precision_on_the_cpu_warns_only_where_the_cpu_has_no_instructions_for_it(
    flags: set[str], warned: set[str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 61, item 6: bf16 was 2.3-2.8x faster than fp32 on a CPU with avx512_bf16; the warning that it is
    much slower holds only where the CPU emulates it."""
    from synopsis.summarizers import base

    monkeypatch.setattr(base, "cpu_flags", lambda: frozenset(flags))
    for dtype in ("bf16", "fp16", "fp32"):
        caplog.clear()
        with caplog.at_level("WARNING", logger="synopsis"):
            base.place_model(torch.nn.Linear(2, 2), "cpu", dtype)
        assert ("much slower than fp32" in caplog.text) == (dtype in warned), (dtype, caplog.text)


def test_the_cpu_flags_are_read_from_proc_cpuinfo() -> None:
    from synopsis.summarizers.base import cpu_flags

    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    assert ("avx512_bf16" in cpu_flags()) == (" avx512_bf16" in text)


# ------------------------------------------------------------------------------ inputs on the model's device
class _Stop(Exception):
    """Raised by the probe at the model's first call: nothing computes on ``meta``."""


def _devices(value: Any, found: set[str]) -> set[str]:
    """The devices of every tensor inside ``value`` (tuples, lists, dicts, dataclass-like objects)."""
    if isinstance(value, torch.Tensor):
        found.add(value.device.type)
    elif isinstance(value, list | tuple):
        for item in value:
            _devices(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _devices(item, found)
    elif hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module | type):
        _devices(vars(value), found)
    return found


def _probe(found: set[str]):  # noqa: ANN202 - a hook
    def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        _devices((args, kwargs), found)
        raise _Stop

    return hook


def _inputs_reaching(summarizer: Any, call: Any, monkeypatch: pytest.MonkeyPatch | None = None) -> set[str]:
    """The devices of what ``summarizer`` hands its model (its encoder, generate(), or the InstructSum
    source cache's encoder pass) during ``call``."""
    found: set[str] = set()
    if monkeypatch is not None:  # the cache checks its inputs' padding on their values, which meta lacks
        from synopsis.models.instructsum import cache

        def encode_source(*args: Any, **kwargs: Any) -> None:
            _devices((args, kwargs), found)
            raise _Stop

        monkeypatch.setattr(cache, "encode_source", encode_source)
    model = summarizer.model
    encoder = model.get_encoder() if hasattr(model, "get_encoder") else None
    if encoder is not None:
        encoder.register_forward_pre_hook(_probe(found), with_kwargs=True)

        def generate(*args: Any, **kwargs: Any) -> None:
            _devices((args, kwargs), found)
            raise _Stop

        model.generate = generate
    else:  # the pointer-generator: its encoder pass is a method of the model

        def encode(*args: Any, **kwargs: Any) -> None:
            _devices((args, kwargs), found)
            raise _Stop

        model.encode = encode
    with pytest.raises(_Stop):
        call()
    assert found, "the probe saw no tensor"
    return found


DOCUMENT = Document.from_text(
    "Introduction\n\nThe cat sat on the mat. It purred all day long.\n\n"
    "Methods\n\nWe counted the purrs. There were many of them."
)


def test_pointer_generator_inputs_are_made_on_the_models_device() -> None:
    from synopsis.summarizers import load_summarizer

    summarizer = load_summarizer("pointer-generator", device=META)
    assert summarizer.describe().device == "meta"
    assert _inputs_reaching(summarizer, lambda: summarizer.summarize([DOCUMENT])) == {"meta"}


def _seq2seq_models(root: Path, tokenizers: Path) -> dict[str, Path]:
    from helpers.tiny_models import save_tiny_bart, save_tiny_t5

    from synopsis.models.seq2seq import convert_checkpoint

    bart = save_tiny_bart(root / "bart", tokenizers)
    t5 = save_tiny_t5(root / "t5", tokenizers)
    return {
        "bart": bart,
        "t5": t5,
        "hie-bart": convert_checkpoint("hie-bart", bart, root / "hie", word_heads=2),
        "hibrids-bart": convert_checkpoint("hibrids", bart, root / "hibrids"),
        "instructsum": convert_checkpoint("instructsum", t5, root / "instructsum"),
        "hibrids-instructsum": convert_checkpoint(
            "hibrids", convert_checkpoint("instructsum", t5, root / "is2"), root / "hibrids-is"
        ),
    }


@pytest.fixture(scope="module")
def seq2seq_models(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _seq2seq_models(tmp_path_factory.mktemp("devices"), shared_data / "tokenizers")


@pytest.mark.parametrize(
    "kind", ["bart", "t5", "hie-bart", "hibrids-bart", "instructsum", "hibrids-instructsum"]
)
def test_seq2seq_inputs_are_made_on_the_models_device(
    seq2seq_models: dict[str, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every seq2seq type, InstructSum's source cache and HIBRIDS' section relations included, whole
    documents and by-section windows."""
    from synopsis.models.instructsum import SourceCache
    from synopsis.summarizers.seq2seq import Seq2SeqSummarizer

    # The cache's key is a digest of the source ids read back to the host, which meta tensors cannot be.
    monkeypatch.setattr(SourceCache, "key", staticmethod(lambda model, ids, *sections: str(ids.shape)))

    summarizer = Seq2SeqSummarizer.from_pretrained(seq2seq_models[kind], device=META)
    assert summarizer.describe().device == "meta"
    instructions = ["What did the cat do?"]
    short = DecodingOptions(max_length=8)

    def whole_document() -> None:
        summarizer.summarize([DOCUMENT], instructions, decoding=short)

    whole = _inputs_reaching(summarizer, whole_document, monkeypatch)
    fresh = Seq2SeqSummarizer.from_pretrained(seq2seq_models[kind], device=META)
    by_section = _inputs_reaching(
        fresh, lambda: fresh.summarize_by_section([DOCUMENT], decoding=short), monkeypatch
    )
    assert whole == by_section
    assert whole == {"meta"}


# ------------------------------------------------------------------------------------- training, experiments
def test_trainers_compute_where_device_says(monkeypatch) -> None:
    """One process without a launcher (the LM's default) and through Accelerate: the chosen device; the
    model is moved there by ``prepare``; ``--dtype`` is the precision of a run whose config leaves it
    unset."""
    from synopsis.training.distributed import Distributed, default_precision, resolve_precision

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    with compute_device("cpu"):
        single, launched = Distributed.single(), Distributed.launch()
    assert single.device == launched.device == torch.device("cpu")
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    single.device = META  # a GPU's stand-in
    prepared, _ = single.prepare(model, optimizer)
    assert prepared.weight.device == META
    assert resolve_precision(None) == "fp32"
    with default_precision("bf16"):
        assert resolve_precision(None) == "bf16" and resolve_precision("fp16") == "fp16"
        with default_precision(None):
            assert resolve_precision(None) == "bf16"
    assert resolve_precision(None) == "fp32"


def test_experiment_device_and_dtype_are_checked_before_any_work(monkeypatch, tmp_path, capsys) -> None:
    from synopsis.cli import main

    fake_gpus(monkeypatch, 0)
    out = tmp_path / "out"
    assert main(["experiment", "hibrids", "--device", "cuda", "-o", str(out), "--data", str(tmp_path)]) == 2
    assert main(["experiment", "instructsum", "--dtype", "fp64", "-o", str(out)]) == 2
    assert main(["experiment", "hibrids-probe", "--device", "tpu", "-o", str(out)]) == 2
    assert main(["experiment", "domain-lm", "--device", "cuda:1", "-o", str(out), "--corpus", "x"]) == 2
    err = capsys.readouterr().err
    assert "--device cuda: torch sees no CUDA GPU on this machine" in err
    assert "must be one of fp32, bf16, fp16, got 'fp64'" in err
    assert "--device 'tpu' is not a device" in err
    assert not out.exists()


def test_experiment_dtype_sets_the_planned_precision(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    import json

    from synopsis.cli import main

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    corpus = shared_data / "masc" / "masc_tagged.zip"
    out = tmp_path / "plan.json"
    args = ["experiment", "domain-lm", "--corpus", str(corpus), "--dry-run", "--json", str(out)]
    assert main([*args, "--dtype", "bf16"]) == 0
    assert json.loads(out.read_text())["precision"] == "bf16"
    assert main(args) == 0
    assert json.loads(out.read_text())["precision"] == "fp32"


# ------------------------------------------------------------------------------------------ on a real GPU
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("device", ["auto", "cuda", "cuda:0"])
def test_on_cuda_a_summarizer_runs_on_the_gpu(device: str) -> None:
    from synopsis.summarizers import load_summarizer

    summarizer = load_summarizer("pointer-generator", device=device)
    assert summarizer.describe().device == "cuda:0"
    torch.cuda.reset_peak_memory_stats()
    assert summarizer.summarize([DOCUMENT], decoding=DecodingOptions(max_length=20))[0]
    assert torch.cuda.max_memory_allocated() > 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("variant", ["baseline", "in", "in_out"])
def test_on_cuda_the_domain_lm_trains_under_autocast_without_warnings(variant: str, precision: str) -> None:
    """The CUDA failure of issue 39 ("Weight scalar types do not match") and cuDNN's contiguity warning."""
    import warnings

    from synopsis.models.domain_lm import DomainLM, DomainLMConfig
    from synopsis.training.distributed import PRECISIONS

    slots = ["style=spoken", "style=written", "topic=public", "topic=everyday"]
    model = DomainLM(DomainLMConfig(50, 16, 16, variant=variant, attribute_slots=slots)).cuda().train()
    ids = torch.randint(0, 50, (4, 9), device="cuda")
    mask = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]], device="cuda").float()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.autocast("cuda", dtype=PRECISIONS[precision]):
            logits, _ = model(ids[:, :-1], mask)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())
