"""Training utilities shared by every method: atomic checkpoints, resume, divergence guards, curves."""
