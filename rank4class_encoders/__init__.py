"""The text encoders below both model families: BERT checkpoints converted to TF Hub SavedModels (tokenizer,
encoder, weights, conversion cache), the Keras `TextEncoder` layer, and cached frozen text embeddings."""

from rank4class_data import stack as _stack

_stack.check_tensorflow_stack()

# Importing the modules registers their Keras objects (under package "rank4class", the name saved models use).
from rank4class_encoders import (  # noqa: E402,F401
    bert_conversion,
    bert_encoder,
    bert_tokenizer,
    bert_weights,
    embedding_cache,
    text_embeddings,
    text_encoder,
)
