"""The margin-ranking Transformer ("rank over class"): pairs in context groups, the margin and listwise
models, aggregation into list orders, configs, item data, training through the engine, evaluation, runs over
seeds."""
