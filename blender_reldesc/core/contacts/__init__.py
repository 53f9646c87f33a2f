"""Contacts (Eurographics 2016): contact phases, their validity against the edited scene,
candidates and re-positioning (``repositioning``), the centre of mass (``balance``) and limb
workspaces (``workspace``), root replanning (``replanning``), free limbs kept out of obstacles
(``avoidance``) and the live preview with contacts (``preview``)."""

from .repositioning import (FRICTION, ROOT_SLACK, SOLE_MAX, ContactError, ContactPhase, Limb, Outcome,
                            adapt_with_contacts, candidate_points, check_contacts, contact_point, contact_report,
                            default_effectors, detect_contacts, duration_score, fabrik, find_limb, force_ellipsoid,
                            force_profile, landed, limb_jacobian, plan_repositioning, profile_along, profile_score,
                            reach_excess, track)
from .preview import ContactsPreview

__all__ = ["ContactsPreview", "FRICTION", "ROOT_SLACK", "SOLE_MAX", "ContactError", "ContactPhase", "Limb", "Outcome",
           "adapt_with_contacts", "candidate_points", "check_contacts", "contact_point", "contact_report",
           "default_effectors", "detect_contacts", "duration_score", "fabrik", "find_limb", "force_ellipsoid",
           "force_profile", "landed", "limb_jacobian", "plan_repositioning", "profile_along", "profile_score", "reach_excess",
           "track"]
