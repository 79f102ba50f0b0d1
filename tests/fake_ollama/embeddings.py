"""Embeddings: a feature-hashed bag of content words, on one of two scales (EMBED_SCALES)."""

import hashlib
import math
import re

from .text import content_words

# "bag": the bag-of-words vectors, unrelated texts near 0; "dense": the same bag and one component every text
# shares, of equal weight, so every cosine is (bag + 1) / 2 and unrelated texts sit near 0.5, as with
# nomic-embed-text (tests/test_similarity_scale.py)
EMBED_SCALES = ("bag", "dense")
_EMBED_PREFIX = re.compile(r"^\s*(?:search_query|search_document):\s*")


def embed_vector(text, dim):
    """Feature-hashed bag of content words, L2-normalised; empty text -> unit vector on dim 0."""
    vector = [0.0] * dim
    words = content_words(_EMBED_PREFIX.sub("", text))
    if not words:
        vector[0] = 1.0
        return vector
    for word in words:
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


def scaled_vector(text, dim, scale):
    """The text's embedding on `scale` (EMBED_SCALES): the bag of words (`dim` components), or with "dense" that bag
    and a shared last component, each of weight 1/sqrt(2) (`dim` + 1 components)."""
    bag = embed_vector(text, dim)
    if scale == "bag":
        return bag
    half = math.sqrt(0.5)
    return [v * half for v in bag] + [half]
