"""Test helpers shared across the unit, integration and e2e suites."""
