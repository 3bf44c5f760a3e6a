"""PyTorch's fused LSTM kernel with explicit weights, in a dtype every device has a kernel for.

``torch.lstm`` (the kernel behind ``nn.LSTM``: cuDNN on GPUs, oneDNN on CPUs) takes its input, state and
weights in one dtype. Under autocast that dtype is chosen here, for both LSTM models (the pointer-generator's
encoder and the domain-attribute LM):

* on a GPU (any device but the CPU), autocast's dtype: cuDNN has bf16 and fp16 LSTM kernels. CUDA autocast
  casts only the input of ``torch.lstm``, not its weight list, so the weights are cast here too (cuDNN refuses
  a mix: "Weight scalar types do not match");
* on the CPU, float32. CPU autocast casts ``lstm`` to bf16, and oneDNN has a bf16 LSTM kernel only on some
  x86-64 CPUs: elsewhere (AVX2 and some AVX-512 CPUs) the call fails with "could not create a primitive
  descriptor for the LSTM forward propagation primitive". A float32 recurrence runs on every CPU; the
  products around it still run under autocast.

Outside autocast the input's dtype is used (float32, or float64 for the reference checks). The casts are part
of the graph, so float32 parameters get their gradients.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

LSTMState = tuple[torch.Tensor, torch.Tensor]


def recurrence_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype an LSTM over ``x`` runs in (see the module docstring)."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type):
        return x.dtype
    return torch.float32 if device_type == "cpu" else torch.get_autocast_dtype(device_type)


def fused_lstm(
    x: torch.Tensor,
    state: LSTMState,
    weights: Sequence[torch.Tensor],
    *,
    num_layers: int = 1,
    dropout: float = 0.0,
    training: bool = False,
    bidirectional: bool = False,
    batch_first: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.lstm(x, state, weights, ...)`` with biases, in :func:`recurrence_dtype`: (output, h_n, c_n).

    ``weights`` are per layer and direction ``weight_ih, weight_hh, bias_ih, bias_hh``, as
    ``nn.LSTM._flat_weights``."""
    dtype = recurrence_dtype(x)
    device_type = x.device.type
    with torch.autocast(device_type, enabled=False):
        output, h_n, c_n = torch.lstm(
            x.to(dtype),
            tuple(part.to(dtype) for part in state),
            [w.to(dtype) for w in weights],
            True,  # has_biases
            num_layers,
            float(dropout),
            training,
            bidirectional,
            batch_first,
        )
    return output, h_n, c_n
