"""A run's directory: its lifecycle (lock first, compare the config second, write third), the lock that keeps
one writer, and config.json (config dataclasses <-> JSON dicts)."""
