"""Generated stubs of groundwire.v1 (do not edit)."""
