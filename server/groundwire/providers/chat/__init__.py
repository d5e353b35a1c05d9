"""Chat model providers behind one protocol (see base.py)."""
