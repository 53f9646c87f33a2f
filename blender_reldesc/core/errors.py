"""Errors raised by the core.

Every error is a ``ValueError`` subclass whose message says what is wrong and
what to do about it, so that an operator can show ``str(error)`` to an animator
and the command line can print it as its one line on stderr.
"""


class RelDescError(ValueError):
    """Base class of every error the core raises on bad input."""


class InputError(RelDescError):
    """An argument has the wrong shape, type, or contains NaN or inf."""


class SkeletonError(RelDescError):
    """The skeleton's parents do not form a forest, or a bone has zero length."""


class MeshError(RelDescError):
    """The environment mesh is empty or malformed."""


class TopologyError(RelDescError):
    """The deformed mesh does not have the bind-time mesh's triangles: re-bind."""


class BindingError(RelDescError):
    """A stored binding cannot be read or does not match what it is used with."""


class Cancelled(Exception):
    """Raised when a progress callback asks to stop a long computation."""
