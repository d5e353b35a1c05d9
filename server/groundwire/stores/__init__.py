"""Vector/lexical stores behind one protocol (see base.py)."""
