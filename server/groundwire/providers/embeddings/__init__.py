"""Embedding providers behind one protocol (see base.py)."""
