"""Numbers over results: ranking metrics in NumPy with a stated tie policy, the one-standard-error rule, and
the mean ± standard deviation of a metric over seeds."""
