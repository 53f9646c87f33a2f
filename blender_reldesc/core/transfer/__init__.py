"""Transfer of an interaction to a novel object (Al-Ashqar's thesis, chapter 4): segmented
objects and their alignment, open-space features (segment distances, the Space Coverage
Feature), the matching of a key posture's joints around the new object, and ``transfer``: the
key posture fitted, the descriptors re-embedded onto the new object, the motion adapted."""

from .features import segment_distances, space_coverage
from .matching import Targets, match_joints, open_space
from .segments import Segmented, TransferError, align, label_parts, match_parts, shared_segments
from .transfer import TransferResult, transfer

__all__ = ["Segmented", "Targets", "TransferError", "TransferResult", "align", "label_parts", "match_joints",
           "match_parts", "open_space", "segment_distances", "shared_segments", "space_coverage", "transfer"]
