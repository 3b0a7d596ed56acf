"""Logging setup: everything goes to stderr, one JSON object per line.

Stdout belongs to the protocol, so no handler here ever writes to it. When stderr is a
terminal (a person started the server by hand) lines are plain text instead, because a wall
of JSON helps nobody reading it live. Extra fields passed as ``extra={...}`` become JSON keys.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

# Never copied into a line: the record's own attributes, and uvicorn's ``color_message`` (the
# message again, with ANSI colour escapes) that it passes as an extra on every record.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_HANDLER_NAME = "skill-mcp-stderr"


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        tail = " " + " ".join(f"{k}={v}" for k, v in extras.items()) if extras else ""
        line = f"skill-mcp {record.levelname.lower()}: {record.getMessage()}{tail}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: str = "info", stream: IO[str] | None = None, *, json_lines: bool | None = None) -> None:
    """Route the root logger to ``stream`` (stderr by default). Calling it again replaces the handler."""
    target = stream if stream is not None else sys.stderr
    if json_lines is None:
        json_lines = not (hasattr(target, "isatty") and target.isatty())
    handler = logging.StreamHandler(target)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonLineFormatter() if json_lines else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_LEVELS.get(level.lower(), logging.INFO))
    logging.captureWarnings(True)
