"""Offline experiments that reproduce published studies with the twin's policies (FGD on openb)."""
