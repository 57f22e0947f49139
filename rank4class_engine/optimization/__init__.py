"""What a step optimizes and how: the one optimizer factory (Adam, Adagrad, AdamW, lazy Adam), learning-rate
schedules, mixed-precision policies, and the one ranking-loss registry of both model families."""
