"""Memory plans: what one training step needs per device, from a model's config alone (``train --dry-run``).

The model is built on the ``meta`` device (shapes only: no weights read, nothing allocated) to count its
parameters. Bytes per device:

* **weights**: the fp32 master copy, 4 bytes a parameter; with bf16/fp16 autocast also the low-precision
  copies autocast keeps for the step (2 bytes a parameter: the backward reads them);
* **gradients**: fp32, 4 bytes a parameter;
* **optimizer state**: AdamW 8 (two fp32 moments), Adagrad 4 (the accumulator), plain SGD 0;
* **activations**: what the forward keeps for the backward at the configured lengths and per-device
  micro-batch, counted tensor by tensor for a Transformer layer as Korthikanti et al. (2022, "Reducing
  Activation Recomputation in Large Transformer Models", section 4.1) do: per encoder layer the inputs of
  every matrix product (``s b h`` elements each), the attention probabilities (``a s k b``: ``k`` = ``s``
  for full attention, the band ``2w + 1`` of LED's sliding window) where the attention path keeps them
  (:func:`attention_path`: eager attention, LED, and on CPU any additive bias; not SDPA's fused kernels on
  CUDA, which keep a log-sum-exp per head and query and read the additive mask, one tensor per stack), the
  feed-forward's ``s b f`` tensors, LayerNorm inputs (fp32), dropout masks (1 byte);
  per decoder layer the same over the ``t`` target tokens plus cross-attention's keys and values of the
  ``s`` source tokens; the logits and their fp32 log-softmax (``t b V``). Matrix-product inputs and
  outputs take 2 bytes under autocast, 4 in fp32. With gradient checkpointing only each layer's input is
  kept (``s b h`` fp32 per encoder layer, ``t b h`` per decoder layer) plus one layer's activations while
  it is recomputed. The backward's own temporaries (the gradients of a layer's activations while it is
  back-propagated, the recomputation's buffers) add :data:`BACKWARD_LAYERS` layers' activations: measured
  on CPU, fitted to H100 measurements on CUDA (the rest is tensor accounting).
* **CUDA context and workspaces** (``device_type: cuda``), stated apart from the tensors: the context is
  outside ``torch.cuda.max_memory_allocated``, the cuBLAS workspaces inside; ``fits`` counts both.

What the plan leaves out, and why it can be off: the Python process, fragmentation, and generation during
validation (run after the step, on the main process, with no gradients). Checked against the measured peak
memory of small configurations on CPU (``tests/test_memory_plan.py``) and of the paper widths on an H100
(``tests/test_memory_plan_gpu.py``; docs/distributed.md says how each is measured).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from synopsis.errors import ConfigError

GIB = 2**30
OPTIMIZER_BYTES = {"adamw": 8, "adagrad": 4, "sgd": 0}
#: the hardware a plan is for (a config's ``device_type``)
DEVICE_TYPES = ("cuda", "cpu")
#: What a CUDA process holds besides tensors, stated apart from them: the context (kernels and driver state,
#: outside ``torch.cuda.max_memory_allocated``; about 0.5 GiB with CUDA's lazy module loading) and the
#: cuBLAS/cuBLASLt workspaces (32 MiB each on Hopper, one per thread that multiplies: the forward's and the
#: autograd engine's; inside ``max_memory_allocated``). benchmarks/gpu_check.py measures both.
CUDA_CONTEXT_BYTES = 512 * 2**20
CUDA_WORKSPACE_BYTES = 2 * 32 * 2**20


@dataclass
class MemoryPlan:
    """Bytes per device of one training step (see the module docstring)."""

    model: str
    parameters: int
    precision: str
    gradient_checkpointing: bool
    devices: int
    micro_batch: int  # examples in one forward pass on one device
    source_tokens: int
    target_tokens: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    device_memory_bytes: int | None = None  # what the configured hardware has; None: not stated
    notes: str | None = None  # what the plan assumed (e.g. a vocabulary size only the data knows)
    device_type: str = "cuda"  # the hardware planned for: cuda or cpu
    attention: str | None = None  # the attention path the model takes there (transformers only)
    context_bytes: int = 0  # the CUDA context: outside torch.cuda.max_memory_allocated
    workspace_bytes: int = 0  # cuBLAS/cuBLASLt workspaces: inside max_memory_allocated

    @property
    def memory_per_device_bytes(self) -> int:
        """The tensors of a step: weights, gradients, optimizer state and activations."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def allocated_bytes(self) -> int:
        """What ``torch.cuda.max_memory_allocated`` should read over a step: the tensors and workspaces."""
        return self.memory_per_device_bytes + self.workspace_bytes

    @property
    def device_total_bytes(self) -> int:
        """All the device holds for this process: the allocations and the CUDA context."""
        return self.allocated_bytes + self.context_bytes

    @property
    def fits(self) -> bool | None:
        if self.device_memory_bytes is None:
            return None
        return self.device_total_bytes <= self.device_memory_bytes

    def to_json(self) -> dict[str, Any]:
        totals = {
            "memory_per_device_bytes": self.memory_per_device_bytes,
            "allocated_bytes": self.allocated_bytes,
            "device_total_bytes": self.device_total_bytes,
        }
        return {**asdict(self), **totals, "fits": self.fits}

    def report(self) -> str:
        """A few lines for the terminal."""

        def gb(value: int) -> str:
            return f"{value / GIB:8.2f} GiB"

        lines = [
            f"model {self.model}: {self.parameters:,} parameters; {self.precision}, gradient checkpointing "
            f"{'on' if self.gradient_checkpointing else 'off'}; {self.devices} device(s), {self.micro_batch} "
            f"example(s) per forward pass, {self.source_tokens} source / {self.target_tokens} target tokens",
            f"  weights      {gb(self.weights_bytes)}",
            f"  gradients    {gb(self.gradients_bytes)}",
            f"  optimizer    {gb(self.optimizer_bytes)}",
            f"  activations  {gb(self.activations_bytes)}",
            f"  total        {gb(self.memory_per_device_bytes)} per device (tensors)",
        ]
        if self.device_type == "cuda":
            lines += [
                f"  workspaces   {gb(self.workspace_bytes)} (cuBLAS; in max_memory_allocated)",
                f"  context      {gb(self.context_bytes)} (CUDA; outside max_memory_allocated)",
                f"  on device    {gb(self.device_total_bytes)}",
            ]
        if self.attention:
            lines.append(f"  attention on {self.device_type}: {self.attention}")
        if self.notes:
            lines.append(f"  note: {self.notes}")
        if self.device_memory_bytes is not None:
            verdict = "fits" if self.fits else "does NOT fit"  # with the context and workspaces
            lines.append(f"  {verdict} in {self.device_memory_bytes / GIB:.0f} GiB per device")
        return "\n".join(lines)


def micro_batch(global_batch: int, devices: int, largest_pass: int | None = None) -> int:
    """Examples in one forward pass on one device: the device's share of the global batch, split into
    micro-batches of at most ``largest_pass`` (as :meth:`Distributed.shard` does)."""
    share = -(-global_batch // devices)
    if largest_pass is None:
        return share
    passes = max(1, -(-share // largest_pass))
    return -(-share // passes)


def parameter_bytes(parameters: int, precision: str, optimizer: str) -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) bytes: fp32 master weights, fp32 gradients and state."""
    weights = parameters * (4 if precision == "fp32" else 6)
    return weights, parameters * 4, parameters * OPTIMIZER_BYTES[optimizer]


def meta_model(model_config: Any) -> torch.nn.Module:
    """A Hugging Face seq2seq model with the shapes of ``model_config`` and no storage (meta device)."""
    from transformers import AutoModelForSeq2SeqLM

    with torch.device("meta"):
        return AutoModelForSeq2SeqLM.from_config(model_config)


@dataclass
class _Dims:
    hidden: int
    heads: int
    inner: int  # heads x head size (T5's inner dim may differ from d_model)
    ffn: int
    gated: bool
    encoder_layers: int
    decoder_layers: int
    vocab: int
    window: int | None  # LED's full attention window (the band is window + 1 wide)
    self_probs: bool  # self-attention keeps its probabilities (eager) or not (fused SDPA kernels)
    cross_probs: bool  # the same for cross-attention
    eager_cross_layers: int  # decoder layers whose cross-attention is eager under any backend (HIBRIDS-DEC)
    bias_heads: int  # heads of the additive bias/mask a fused kernel reads, one tensor per stack (0: none)
    dropout: bool
    attention_dropout: bool


def attention_path(config: Any, device_type: str) -> str:
    """The attention kernel a training step of ``config``'s model takes on ``device_type``, in words."""
    d = _dims(config, device_type)
    if d.window is not None:
        return "LED: banded eager self-attention (probabilities of the band kept), eager decoder attention"
    if d.self_probs:
        return "eager: s x s probabilities kept for the backward"
    kind = "with an additive bias" if d.bias_heads > 1 else "with a padding mask"
    extra = f"; {d.eager_cross_layers} eager cross-attention layers (HIBRIDS-DEC)"
    extra = extra if d.eager_cross_layers else ""
    return f"SDPA memory-efficient/flash {kind}: no probabilities kept{extra}"


def _dims(config: Any, device_type: str = "cuda") -> _Dims:
    """The shapes that count and the attention path on ``device_type`` (cuda or cpu; module docstring)."""
    if device_type not in DEVICE_TYPES:
        raise ConfigError(f"device_type must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}")
    hidden = config.d_model
    heads = getattr(config, "encoder_attention_heads", None) or config.num_heads
    inner = getattr(config, "d_kv", hidden // heads) * heads
    ffn = getattr(config, "encoder_ffn_dim", None) or config.d_ff
    encoder_layers = getattr(config, "encoder_layers", None) or config.num_layers
    decoder_layers = getattr(config, "decoder_layers", None) or getattr(config, "num_decoder_layers", None)
    window = getattr(config, "attention_window", None)
    if isinstance(window, list | tuple):
        window = max(window)
    dropout = float(getattr(config, "dropout", getattr(config, "dropout_rate", 0.0)) or 0.0)
    attention_dropout = float(
        getattr(config, "attention_dropout", getattr(config, "dropout_rate", 0.0)) or 0.0
    )
    sdpa = getattr(config, "_attn_implementation", "eager") == "sdpa"
    if device_type == "cpu":
        # Calibrated on CPU (tests/test_memory_plan.py): SDPA's CPU kernels keep O(s) per head only without
        # an additive bias; T5's relative positions, HIBRIDS' section biases, InstructSum's block mask and
        # Hie-BART's sentence heads add one, and then the probabilities are kept as in eager attention.
        eager = window is not None or not sdpa or config.model_type not in ("bart", "mbart")
        self_probs = cross_probs = eager
        eager_cross, bias_heads = 0, 0
    elif window is not None:  # LED has only its own attention: a banded encoder, eager decoder products
        self_probs = cross_probs = True
        eager_cross, bias_heads = 0, 0
    else:
        # CUDA: SDPA's memory-efficient kernel takes an additive mask (T5's position bias, InstructSum's block
        # mask) and keeps O(s) per head; flash takes none. HIBRIDS-DEC's last two cross-attentions are eager.
        self_probs = cross_probs = not sdpa
        decoder_bias = bool(getattr(config, "hibrids_decoder", False)) and sdpa
        eager_cross = 2 if decoder_bias else 0
        bias_heads = (heads if "t5" in config.model_type else 1) if sdpa else 0
    return _Dims(
        hidden=hidden,
        heads=heads,
        inner=inner,
        ffn=ffn,
        gated=bool(getattr(config, "is_gated_act", False)),
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers or encoder_layers,
        vocab=config.vocab_size,
        window=window,
        self_probs=self_probs,
        cross_probs=cross_probs,
        eager_cross_layers=eager_cross,
        bias_heads=bias_heads,
        dropout=dropout > 0,
        attention_dropout=attention_dropout > 0,
    )


def _attention_bytes(
    d: _Dims, queries: int, keys: int, batch: int, e: int, self_attention: bool, probs: bool
) -> int:
    """One attention sublayer: LayerNorm input, projections' inputs, Q/K/V, context, masks; with ``probs``
    its probabilities (eager attention)."""
    kept = queries * batch * d.hidden * 4  # LayerNorm input (fp32 also under autocast)
    kept += (
        queries * batch * d.hidden * e
    )  # input of the query (and, in self-attention, key/value) projection
    kept += queries * batch * d.inner * e  # queries
    kept += 2 * keys * batch * d.inner * e  # keys and values
    kept += queries * batch * d.inner * e  # context: input of the output projection
    if not probs:
        kept += d.heads * queries * batch * 4  # the fused kernel's log-sum-exp, fp32
    if d.dropout:
        kept += queries * batch * d.hidden  # residual dropout mask
    span = keys
    band = d.window is not None and self_attention and keys == queries
    if band:
        # LED's sliding chunks: overlapping chunks of 2w (twice the band), diagonal-padded scores
        span = min(keys, 2 * (d.window + 1))
        kept += 2 * queries * batch * d.inner * e  # chunked copies of queries and keys
    if probs:
        # softmax output, fp32; LED's band probabilities are cast back to the scores' dtype (``type_as``:
        # 2 bytes under autocast, as the saved tensors of a bf16 step show, tests/test_memory_plan.py)
        kept += d.heads * queries * span * batch * (e if band else 4)
        if d.attention_dropout:
            kept += d.heads * queries * span * batch * (1 + e)  # mask and dropped probabilities
    return kept


def _ffn_bytes(d: _Dims, tokens: int, batch: int, e: int) -> int:
    kept = tokens * batch * d.hidden * 4  # LayerNorm input
    kept += tokens * batch * d.hidden * e  # input of the first product
    kept += tokens * batch * d.ffn * e * (3 if d.gated else 2)  # activation input and output (gated: x2 wi)
    if d.dropout:
        kept += tokens * batch * (d.ffn + d.hidden)  # masks
    return kept


def activation_bytes(
    model_config: Any,
    source: int,
    target: int,
    batch: int,
    precision: str,
    checkpointing: bool,
    device_type: str = "cuda",
) -> int:
    """Bytes the forward keeps for the backward (and the backward's temporaries) on ``device_type``; see the
    module docstring."""
    d = _dims(model_config, device_type)
    e = 4 if precision == "fp32" else 2
    if d.window is not None:  # LED pads the input to a multiple of the window
        source = math.ceil(source / d.window) * d.window
    encoder_layer = _attention_bytes(d, source, source, batch, e, True, d.self_probs)
    encoder_layer += _ffn_bytes(d, source, batch, e)

    def decoder_layer(cross_probs: bool) -> int:
        return (
            _attention_bytes(d, target, target, batch, e, True, d.self_probs)
            + _attention_bytes(d, target, source, batch, e, False, cross_probs)
            + _ffn_bytes(d, target, batch, e)
        )

    plain, eager = decoder_layer(d.cross_probs), decoder_layer(True)
    embeddings = (source + target) * batch * d.hidden * 4 * 2  # embedding output and its LayerNorm
    encoder_output = source * batch * d.hidden * 4
    logits = target * batch * d.vocab * (e + 4)  # logits and the fp32 log-softmax
    # the additive bias or mask a fused kernel reads: one per stack (T5 reuses layer 0's position bias)
    masks = d.bias_heads * batch * (source * source + target * target + target * source) * e
    largest = max(encoder_layer, plain, eager if d.eager_cross_layers else 0)
    decoder_layers = (d.decoder_layers - d.eager_cross_layers) * plain + d.eager_cross_layers * eager
    if checkpointing:
        layers = (d.encoder_layers * source + d.decoder_layers * target) * batch * d.hidden * 4
        layers += largest  # the layer being recomputed
    else:
        layers = d.encoder_layers * encoder_layer + decoder_layers
    backward_temporaries = largest * BACKWARD_LAYERS[device_type, d.window is not None]
    return int(embeddings + encoder_output + logits + masks + layers + backward_temporaries)


def seq2seq_plan(
    model_config: Any,
    *,
    model: str,
    source: int,
    target: int,
    global_batch: int,
    largest_pass: int,
    devices: int,
    precision: str,
    checkpointing: bool,
    device_memory_gb: float | None,
    parameters: int | None = None,
    device_type: str = "cuda",
) -> MemoryPlan:
    """The plan of ``train seq2seq`` (AdamW) for a Hugging Face seq2seq ``model_config`` on ``device_type``
    (cuda or cpu: the attention path differs, :func:`attention_path`)."""
    if parameters is None:
        parameters = sum(p.numel() for p in meta_model(model_config).parameters())
    batch = micro_batch(global_batch, devices, largest_pass)
    activations = activation_bytes(model_config, source, target, batch, precision, checkpointing, device_type)
    plan = recurrent_plan(
        model=model,
        parameters=parameters,
        optimizer="adamw",
        activations=activations,
        source=source,
        target=target,
        batch=batch,
        devices=devices,
        precision=precision,
        device_memory_gb=device_memory_gb,
        checkpointing=checkpointing,
        device_type=device_type,
    )
    plan.attention = attention_path(model_config, device_type)
    return plan


def recurrent_plan(
    *,
    model: str,
    parameters: int,
    optimizer: str,
    activations: int,
    source: int,
    target: int,
    batch: int,
    devices: int,
    precision: str,
    device_memory_gb: float | None,
    notes: str | None = None,
    checkpointing: bool = False,
    device_type: str = "cuda",
) -> MemoryPlan:
    """The plan of a trainer from its parts: an LSTM trainer's (pointer-generator: Adagrad; domain LM: SGD;
    no checkpointing) and, through :func:`seq2seq_plan`, a transformer's (AdamW)."""
    if device_type not in DEVICE_TYPES:
        raise ConfigError(f"device_type must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}")
    weights, gradients, state = parameter_bytes(parameters, precision, optimizer)
    cuda = device_type == "cuda"
    return MemoryPlan(
        model=model,
        parameters=parameters,
        precision=precision,
        gradient_checkpointing=checkpointing,
        devices=devices,
        micro_batch=batch,
        source_tokens=source,
        target_tokens=target,
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=state,
        activations_bytes=activations,
        device_memory_bytes=None if device_memory_gb is None else int(device_memory_gb * GIB),
        notes=notes,
        device_type=device_type,
        context_bytes=CUDA_CONTEXT_BYTES if cuda else 0,
        workspace_bytes=CUDA_WORKSPACE_BYTES if cuda else 0,
    )


def pointer_generator_activation_bytes(
    *, vocab: int, embedding: int, hidden: int, source: int, target: int, batch: int, precision: str
) -> int:
    """What a teacher-forced step of the pointer-generator (See et al., 2017) keeps for the backward, coverage
    on (the larger second phase). Counted per tensor: the encoder's embeddings and their gathered / flipped
    copies (3E a token), the two fused LSTM directions' gates, states and outputs and the attention features
    ``W_h h_i`` (24H a token); per decoder step the attention over the ``s`` source tokens (eq. 1 and 11:
    coverage, energies, masked softmax, the coverage loss's minimum: 7 tensors of ``b s``) and the LSTM cell
    (20H a row); over all steps the output layer's input and the vocabulary logits with their fp32
    log-softmax (``b t V``) and the copy term's ``b t s`` tensors (the (V + OOV) distribution itself is never
    built in training: only the gold word's probability, :meth:`CopyMixture.token_nll`). The backward's
    temporaries (the logits' gradient, one ``b t V`` fp32 tensor, and the step's gradients) are the
    fitted part: ``PG_BACKWARD`` times the logits' bytes, measured on CPU (tests/test_memory_plan.py)."""
    e = 4 if precision == "fp32" else 2
    encoder = batch * source * (3 * embedding + 24 * hidden) * 4
    steps = target * batch * (7 * source + 20 * hidden) * 4
    logits = target * batch * vocab * (e + 4)
    outputs = target * batch * (4 * hidden * 4 + 3 * source * 4)
    return int(encoder + steps + logits + outputs + PG_BACKWARD * target * batch * vocab * 4)


def lstm_lm_activation_bytes(
    *,
    vocab: int,
    embedding: int,
    hidden: int,
    layers: int,
    bptt: int,
    batch: int,
    precision: str,
    groups: int,
    augment_input: bool = True,
    augment_output: bool = True,
) -> int:
    """One truncated-BPTT window of the domain-attribute LSTM LM: per token the embedding, its dropout mask
    and output (3E), the input as the fused LSTM reads it (``groups`` x E for ``groups`` attribute
    combinations in the batch), the LSTM's gates, states and outputs (8H a layer), the output dropout (2H),
    the logits and cross-entropy's fp32 log-softmax (``b t V``); an augmented layer's effective weights,
    one block per combination (``groups`` x V x H on the output side, ``groups`` x 4H x E on the input
    side), kept for the backward, and the output blocks' gradient, a backward temporary of the same size;
    the other backward temporaries are ``LM_BACKWARD`` times the logits' bytes, measured on CPU
    (tests/test_memory_plan.py)."""
    e = 4 if precision == "fp32" else 2
    tokens = bptt * batch
    per_token = (3 * embedding + groups * embedding + 8 * hidden * layers + 2 * hidden) * 4
    logits = tokens * vocab * (e + 4)
    effective = groups * vocab * hidden * (e + 4) if augment_output else 0
    effective += groups * 4 * hidden * embedding * e if augment_input else 0
    return int(tokens * per_token + logits + effective + LM_BACKWARD * tokens * vocab * 4)


# The backward's temporaries of a transformer step (the gradients of a layer's activations while it is
# back-propagated, the recomputation's own buffers) in layers' activations, by (device type, LED):
# * cpu: measured at 1-3.5 layers (peak RSS, tests/test_memory_plan.py); LED's sliding-window product pads
#   and diagonalises copies of its band scores in the backward, hence twice as much;
# * cuda: fitted to the three measured H100 rows of docs/results/gpu.md (max_memory_allocated): the caching
#   allocator hands a freed block to the next tensor at once, so about one layer is live beside the one
#   being back-propagated; LED's band copies as on CPU. To be re-checked by benchmarks/gpu_check.py.
BACKWARD_LAYERS = {("cpu", False): 2, ("cpu", True): 4, ("cuda", False): 1, ("cuda", True): 2}
# Fitted on CPU (tests/test_memory_plan.py): the backward's temporaries in units of one fp32 b x t x V tensor.
PG_BACKWARD = 1.0
LM_BACKWARD = 2.0
