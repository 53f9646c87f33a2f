"""Solvers: position-based warping of the pose towards the targets."""

from .warping import Warper, color_edges, colour_slices

__all__ = ["Warper", "color_edges", "colour_slices"]
