"""Relationship descriptors: sampling the surfaces, weights and reconstruction (Eqs. 1-7),
the Binding that stores them, and their re-embedding when a contact moves."""

from .binding import Binding, bind, measure_body_height
from .reembedding import Attachment, Embedding, Reembedded, attach, reembed
from .sampling import GeodesicSampler
from .weights import (BLOCK_FRAMES, CACHE_ENTRIES, SHORT_SPAN, CoefficientCache, Coefficients, compute_coefficients,
                      frames_of, reconstruct)

__all__ = ["Attachment", "BLOCK_FRAMES", "Binding", "CACHE_ENTRIES", "CoefficientCache", "Coefficients", "Embedding",
           "GeodesicSampler", "Reembedded", "SHORT_SPAN", "attach", "bind", "compute_coefficients", "frames_of",
           "measure_body_height", "reconstruct", "reembed"]
