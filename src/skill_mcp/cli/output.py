"""Printing: text for people on stdout, JSON for scripts on stdout, errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def warn(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")


def fail(code: int, message: str, *, json_mode: bool = False, reason: str | None = None) -> int:
    """Report an error on stderr (as one JSON object with --json) and return ``code``."""
    if json_mode:
        payload: dict[str, Any] = {"error": message, "exit": code}
        if reason:
            payload["reason"] = reason
        sys.stderr.write(json.dumps(payload, sort_keys=True) + "\n")
    else:
        sys.stderr.write(f"skill-mcp: error: {message}\n")
    return code
