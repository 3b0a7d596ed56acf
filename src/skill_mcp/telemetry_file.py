"""Spans and metrics as OTLP JSON lines in a file (``SKILL_MCP_OTEL_FILE``).

The appliance's server uid has no network at all (``nftables/skill-mcp.nft``), so it cannot
send OTLP anywhere. It can write a file on a volume it owns; a collector beside it (a sidecar
container with the OpenTelemetry Collector's ``otlpjsonfile`` receiver) reads the lines and
forwards them. Nothing privileged parses them, and the ruleset is unchanged.

Each line is one ``ExportTraceServiceRequest`` or ``ExportMetricsServiceRequest`` in the OTLP
JSON encoding (trace and span ids as hex, enums as integers). The file is created private
(0600) to this uid; past ``MAX_BYTES`` it is renamed to ``<name>.1`` (replacing the previous
one) and a new file is started, so the volume holds at most twice that.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

MAX_BYTES = 64 * 1024 * 1024
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(node: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants ids as hex."""
    if isinstance(node, dict):
        return {
            k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def otlp_json(message: Any) -> str:
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    return json.dumps(_hex_ids(MessageToDict(message, use_integers_for_enums=True)), separators=(",", ":"))


class OtlpJsonFile:
    """One append-only file shared by the span and the metric exporter (a lock orders lines)."""

    def __init__(self, path: str, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def write(self, line: str) -> bool:
        data = (line + "\n").encode("utf-8")
        with self._lock:
            try:
                if os.path.exists(self.path) and os.path.getsize(self.path) + len(data) > self.max_bytes:
                    os.replace(self.path, self.path + ".1")
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            except OSError:
                return False
        return True

    def span_exporter(self) -> Any:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

        sink = self

        class _Spans(SpanExporter):
            def export(self, spans: Sequence[Any]) -> SpanExportResult:
                ok = sink.write(otlp_json(encode_spans(spans)))
                return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

            def shutdown(self) -> None:
                return None

        return _Spans()

    def metric_exporter(self) -> Any:
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
        from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

        sink = self

        class _Metrics(MetricExporter):
            def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
                ok = sink.write(otlp_json(encode_metrics(metrics_data)))
                return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
                return None

        return _Metrics()
