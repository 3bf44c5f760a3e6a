"""Attribute-labelled corpora, training and the leave-one-domain-out experiment for DomainLM."""
