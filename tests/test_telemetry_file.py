"""The OTLP JSON lines file: ids in hex as OTLP JSON wants, private, and bounded."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from skill_mcp.telemetry_file import OtlpJsonFile


def test_spans_are_written_as_otlp_json_lines_with_hex_ids(tmp_path: Path) -> None:
    sink = OtlpJsonFile(str(tmp_path / "otlp.jsonl"))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sink.span_exporter()))
    with provider.get_tracer("t").start_as_current_span("outer"), provider.get_tracer("t").start_as_current_span("in"):
        pass
    provider.shutdown()
    path = tmp_path / "otlp.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    spans = [
        span
        for line in path.read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    inner, outer = spans
    assert len(inner["traceId"]) == 32 and int(inner["traceId"], 16)
    assert inner["parentSpanId"] == outer["spanId"] and len(outer["spanId"]) == 16
    assert inner["kind"] == 1  # enums as integers (SPAN_KIND_INTERNAL)


def test_the_file_is_renamed_once_past_its_bound(tmp_path: Path) -> None:
    sink = OtlpJsonFile(str(tmp_path / "otlp.jsonl"), max_bytes=100)
    for i in range(5):
        assert sink.write(json.dumps({"n": i, "pad": "x" * 40}))
    assert (tmp_path / "otlp.jsonl").stat().st_size <= 100
    assert (tmp_path / "otlp.jsonl.1").stat().st_size <= 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["otlp.jsonl", "otlp.jsonl.1"]
