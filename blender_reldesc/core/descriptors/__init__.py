"""Relationship descriptors: sampling the surfaces, weights and reconstruction (Eqs. 1-7),
and the Binding that stores them."""

from .binding import Binding, bind, measure_body_height
from .sampling import GeodesicSampler
from .weights import (BLOCK_FRAMES, CACHE_ENTRIES, SHORT_SPAN, CoefficientCache, Coefficients, compute_coefficients,
                      frames_of, reconstruct)

__all__ = ["BLOCK_FRAMES", "Binding", "CACHE_ENTRIES", "CoefficientCache", "Coefficients", "GeodesicSampler",
           "SHORT_SPAN", "bind", "compute_coefficients", "frames_of", "measure_body_height", "reconstruct"]
