"""Configuration, factories, the CLI, logging, telemetry and the running app's lifecycle."""
