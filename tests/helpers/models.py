"""Helpers on models shared by the method tests."""

from __future__ import annotations

import torch


def randomize_tables(
    model: torch.nn.Module, std: float = 1.0, seed: int = 1, which: str = "", native: bool = False
) -> None:
    """Fill HIBRIDS' bias tables (parameters named ``*hibrids*`` and ``which``) with N(0, std^2) draws, so
    that a test sees what trained, nonzero tables do; ``native`` draws in each table's own dtype (float64
    tables get float64 draws) rather than float32."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "hibrids" in name and which in name:
                dtype = p.dtype if native else torch.float32
                p.copy_(torch.randn(p.shape, generator=generator, dtype=dtype) * std)
