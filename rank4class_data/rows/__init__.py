"""Row files as they come (CSV, TSV, JSONL, LibSVM, Orange `.tab`): opening them, the one LibSVM line parser,
the bad-row policy, and the class-texts file."""
