"""Placeholder replaced below."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: Any) -> None:
    del sub


def run(args: argparse.Namespace) -> int:
    del args
    return 0
