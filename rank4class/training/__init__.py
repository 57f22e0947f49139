"""Rank4Class training: the run's settings, training data (frozen text embedded), model setup, train, the
zero-shot choice and tuning."""
