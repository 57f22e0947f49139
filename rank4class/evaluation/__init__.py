"""Rank4Class evaluation: Keras metrics, evaluators, full-class evaluation, the report, evaluate,
baselines."""
