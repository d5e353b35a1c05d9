"""Prints the figures the security tests collect (cases per RPC, combinations
checked, canaries searched, faults survived) at the end of the pytest run."""

from __future__ import annotations

import pytest

from tests.security.harness import FIGURES, SUMMARIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for module, build in SUMMARIES:
        line = build()
        if line is not None:
            FIGURES.append((module, line))
    if not FIGURES:
        return
    terminalreporter.section("groundwire security figures")
    for module, line in FIGURES:
        terminalreporter.write_line(f"[{module}] {line}")
