"""The character: joint hierarchy, armature math, rotation recovery, hinges."""

from .hierarchy import Skeleton

__all__ = ["Skeleton"]
