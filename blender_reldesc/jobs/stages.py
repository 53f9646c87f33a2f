"""The stages a bake carries besides its character, chosen by what the read binding names:
its garments (``garment.GarmentStage``) and its partners (``partners.PartnerStage``). Each feature's
module is reached through ``optional.feature`` when a binding asks for it: the bake never
imports them, and a feature that cannot be imported fails only the bakes that need it."""

from __future__ import annotations

from ..optional import feature


def stages(job):
    """The stages of a read ``BakeJob``: its garments when it has any, then its partners when it
    was bound with some (and adapts them: a reach or a transfer does not; a partner of a group
    being baked is in that group already)."""
    out = []
    if job.bound.garments:
        out.append(feature("garment").GarmentStage(job))
    if job.bound.meta.get("partners") and job.carries_partners and not job.in_group:
        out.append(feature("partners").PartnerStage(job))
    return out
