"""Grouped ranking data: items in context groups, a user's grouped rows, query-grouped feature rows (LibSVM,
ELWC) and CSV ranking corpora."""
