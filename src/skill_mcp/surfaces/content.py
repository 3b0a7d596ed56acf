"""MIME types and the text-or-base64 decision for served bytes."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass

# Explicit entries for what skills actually ship; the platform table is only a fallback and
# differs between machines, so the common cases must not depend on it.
_BY_SUFFIX = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".cjs": "text/javascript",
    ".ts": "text/x-typescript",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".css": "text/css",
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
    ".zip": "application/zip",
    ".gz": "application/gzip",
    ".ttf": "font/ttf",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
DIRECTORY_MIME = "inode/directory"
MARKDOWN = "text/markdown"


def _suffix(name: str) -> str:
    """``PurePosixPath(name).suffix`` for a final path component, without building a path."""
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def guess_mime(rel: str) -> str | None:
    name = rel.rpartition("/")[2]
    suffix = _suffix(name).lower()
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed


@dataclass(frozen=True, slots=True)
class Encoded:
    mime_type: str
    text: str | None  # set when the bytes are UTF-8 text
    blob: str | None  # base64 otherwise

    @property
    def encoding(self) -> str:
        return "utf-8" if self.text is not None else "base64"


def encode(rel: str, data: bytes) -> Encoded:
    """Text when the bytes are UTF-8 without NUL; base64 with a MIME type otherwise."""
    mime = guess_mime(rel)
    if b"\x00" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return Encoded(mime or "text/plain", text, None)
    return Encoded(mime or "application/octet-stream", None, base64.b64encode(data).decode("ascii"))
