"""Rank4Class's experiments: the study of the paper's tables and the many-class study."""
