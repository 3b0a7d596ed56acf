"""Which telemetry exports the environment asks for: pure, standard library only.

The composition root asks ``wanted`` before anything of OpenTelemetry is imported, so a server
with nothing configured imports neither this package's ``telemetry`` nor the SDK. The variables
are the standard ``OTEL_*`` ones (read from ``Settings.environ``, never ``os.environ``) plus
``SKILL_MCP_OTEL_FILE``; docs/configuration.md lists each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

__all__ = ["TelemetryConfig", "config_from_environ", "wanted"]

SERVICE_NAME = "skill-mcp"
DEFAULT_OTLP = "http://localhost:4318"
SUPPORTED_PROTOCOL = "http/protobuf"
_OFF_WORDS = frozenset({"1", "true", "yes", "on"})


def _exporters(value: str | None) -> set[str]:
    return {p.strip().lower() for p in (value or "").split(",") if p.strip()}


def wanted(environ: Mapping[str, str], *, scrape: bool = False) -> bool:
    """Whether anything is configured to leave the process (pure; no OpenTelemetry import).

    Traces or metrics are exported over OTLP when their ``OTEL_*_EXPORTER`` says ``otlp``, or
    when it is unset and an OTLP endpoint is set; ``SKILL_MCP_OTEL_FILE`` writes both to a file;
    ``scrape`` is a Prometheus scrape endpoint asked for (``serve --http --metrics``).
    ``OTEL_SDK_DISABLED=true`` turns the OTLP and file exports off (not an explicit endpoint).
    """
    if scrape:
        return True
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _OFF_WORDS:
        return False
    cfg = config_from_environ(environ)
    return cfg.traces_endpoint is not None or cfg.metrics_endpoint is not None or cfg.file_path is not None


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """Where spans and metrics go; built by ``config_from_environ`` (pure)."""

    service_name: str = SERVICE_NAME
    resource: Mapping[str, str] = field(default_factory=dict)
    traces_endpoint: str | None = None  # a full URL (…/v1/traces) or None: no OTLP spans
    metrics_endpoint: str | None = None  # a full URL (…/v1/metrics) or None: no OTLP metrics
    traces_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    metrics_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    file_path: str | None = None  # OTLP JSON lines, spans and metrics (SKILL_MCP_OTEL_FILE)
    export_interval_ms: int = 60_000
    timeout_s: float = 10.0
    ignored: tuple[str, ...] = ()  # settings asked for that this build cannot honour, for one warning


def _pairs(value: str | None) -> dict[str, str]:
    """``k=v,k2=v2`` (the W3C baggage form the OTEL_* variables use), values URL-decoded."""
    out: dict[str, str] = {}
    for item in (value or "").split(","):
        key, sep, val = item.partition("=")
        if sep and key.strip():
            out[unquote(key.strip())] = unquote(val.strip())
    return out


def _endpoint(environ: Mapping[str, str], signal: str, exporter_var: str, ignored: list[str]) -> str | None:
    kinds = _exporters(environ.get(exporter_var))
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    general = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    for kind in sorted(kinds - {"otlp", "none"}):
        # "console" would write to stdout, which belongs to the protocol; others need packages
        # this server does not carry.
        ignored.append(f"{exporter_var}={kind}")
    if "none" in kinds or (kinds and "otlp" not in kinds):
        return None
    if not kinds and not (specific or general):
        return None
    if specific:
        return specific
    return (general or DEFAULT_OTLP).rstrip("/") + f"/v1/{signal}"


def config_from_environ(environ: Mapping[str, str]) -> TelemetryConfig:
    """The standard ``OTEL_*`` variables this server honours, and ``SKILL_MCP_OTEL_FILE``."""
    ignored: list[str] = []
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _OFF_WORDS
    protocol = (environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or SUPPORTED_PROTOCOL).strip().lower()
    traces = _endpoint(environ, "traces", "OTEL_TRACES_EXPORTER", ignored)
    metrics = _endpoint(environ, "metrics", "OTEL_METRICS_EXPORTER", ignored)
    for signal in ("TRACES", "METRICS"):
        own = (environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or protocol).strip().lower()
        if own != SUPPORTED_PROTOCOL:
            ignored.append(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL={own} (only {SUPPORTED_PROTOCOL})")
            if signal == "TRACES":
                traces = None
            else:
                metrics = None
    if disabled:
        traces = metrics = None
    headers = _pairs(environ.get("OTEL_EXPORTER_OTLP_HEADERS"))
    resource = _pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES"))
    service = (environ.get("OTEL_SERVICE_NAME") or resource.pop("service.name", "") or SERVICE_NAME).strip()
    interval = environ.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
    timeout = environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "").strip()
    return TelemetryConfig(
        service_name=service,
        resource=resource,
        traces_endpoint=traces,
        metrics_endpoint=metrics,
        traces_headers={**headers, **_pairs(environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))},
        metrics_headers={**headers, **_pairs(environ.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS"))},
        file_path=None if disabled else (environ.get("SKILL_MCP_OTEL_FILE") or "").strip() or None,
        export_interval_ms=int(interval) if interval.isdigit() and int(interval) > 0 else 60_000,
        timeout_s=int(timeout) / 1000 if timeout.isdigit() and int(timeout) > 0 else 10.0,
        ignored=tuple(ignored),
    )
