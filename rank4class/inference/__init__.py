"""Rank4Class inference: export folders, calibration, full-class scoring, served kinds, serving signature,
two-stage and zero-shot exports, export and predict."""
