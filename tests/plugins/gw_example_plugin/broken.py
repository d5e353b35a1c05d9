"""A plug-in whose import fails: groundwire must report it as a configuration
error naming the key, never crash."""

raise ImportError("this plug-in needs a library that is not installed")
