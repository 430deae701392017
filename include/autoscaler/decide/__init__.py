"""Decide: whether a policy's proposal is worth acting on (``rules.py``)."""
