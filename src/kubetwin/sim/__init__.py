"""Deterministic discrete-event clock."""
