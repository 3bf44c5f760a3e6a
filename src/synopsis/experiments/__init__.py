"""The papers' experiments at CPU scale, kept apart from the training loops they drive.

* :mod:`synopsis.experiments.hie_bart_heads`: Hie-BART's word:sentence head ratios (``synopsis experiment
  hie-bart-heads``).
* :mod:`synopsis.experiments.domain_lm`: the domain-attribute LM's unseen-domain protocol on MASC
  (``synopsis experiment domain-lm``).
"""
