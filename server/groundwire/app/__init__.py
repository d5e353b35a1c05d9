"""Configuration, wiring, the CLI and the server's lifecycle."""
