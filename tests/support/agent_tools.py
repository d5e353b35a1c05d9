"""Python tools registered by import path in agent tests."""

from __future__ import annotations

import asyncio


async def get_weather(city: str, unit: str = "C") -> dict[str, str]:
    """Current weather for a city."""
    return {"city": city, "condition": "clear", "unit": unit}


def explode(reason: str) -> str:
    """Always raises (the message must never reach the model or the caller)."""
    raise RuntimeError(f"secret internal failure {reason}")


async def hang() -> str:
    """Never answers."""
    await asyncio.sleep(3600)
    return "late"
