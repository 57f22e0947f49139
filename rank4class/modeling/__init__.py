"""Rank4Class's model: instance encoders, class encoders, interactions, class sampling, ranking math, the
model."""
