"""The viewport: the live preview (``live``) and the overlay of descriptors and targets (``overlay``)."""
