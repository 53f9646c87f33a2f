"""Contacts (Eurographics 2016): contact phases, their validity against the edited scene,
candidates and re-positioning (today in one module, ``repositioning``)."""

from .repositioning import (FRICTION, ROOT_SLACK, ContactError, ContactPhase, Limb, Outcome, adapt_with_contacts,
                            candidate_points, check_contacts, contact_point, contact_report, default_effectors,
                            detect_contacts, fabrik, find_limb, force_ellipsoid, force_profile, limb_jacobian,
                            plan_repositioning, profile_along)

__all__ = ["FRICTION", "ROOT_SLACK", "ContactError", "ContactPhase", "Limb", "Outcome", "adapt_with_contacts",
           "candidate_points", "check_contacts", "contact_point", "contact_report", "default_effectors",
           "detect_contacts", "fabrik", "find_limb", "force_ellipsoid", "force_profile", "limb_jacobian",
           "plan_repositioning", "profile_along"]
