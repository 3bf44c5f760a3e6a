"""Models, one self-contained file per method (config in, tensors out)."""
