"""The HTTP server's stderr is JSON lines a log collector can take as they are.

uvicorn hands every record its message a second time, with ANSI colour escapes, as the extra
``color_message``; copied into the JSON it put terminal escapes into every log store. And the
line that says where the server listens is the normal outcome, not a warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from tests.helpers import wait_until
from tests.http.harness import running_http_server

TOKEN = "http-logs-token-0123456789abcdef"
CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def test_http_logs_are_json_lines_without_colour_escapes_and_listening_is_info() -> None:
    with running_http_server([CORPUS], token=TOKEN) as srv:
        with httpx2.Client(timeout=20) as http:
            http.get(srv.url.rsplit("/", 1)[0] + "/nowhere")  # a refusal, logged
        wait_until(lambda: "http-refused" in srv.stderr, "the refusal in the log")
        status = srv.terminate()
    assert status == 0
    records = [json.loads(line) for line in srv.stderr_lines if line.strip()]
    uvicorn_lines = [r for r in records if r["logger"].startswith("uvicorn")]
    assert uvicorn_lines, "uvicorn logged nothing: the test would prove nothing"  # positive control
    assert not [r for r in records if "color_message" in r]
    assert "\x1b" not in srv.stderr
    listening = [r for r in records if r.get("event") == "http-listening"]
    assert [r["level"] for r in listening] == ["info"]
