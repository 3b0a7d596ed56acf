"""Traces and metrics for operators, by the OpenTelemetry MCP semantic conventions.

Off unless configured (``telemetry_config.wanted``): the composition root then builds no ``Telemetry`` at all,
installs no middleware and imports nothing of this module or of the OpenTelemetry SDK, so an
unconfigured server pays nothing per call. On, one ``Telemetry`` is built per process by the
composition root and handed to what records (the request middleware in ``surfaces.observe``,
``skill_run``, the catalog and search builds, the HTTP transport); it holds its own tracer and
meter providers, never the process-global ones.

What leaves the process is names, digests, counts, durations and stable reasons: never a tool
argument's value, an environment value, a file's content or a secret. Every attribute is set
by code here from values the server itself produced or checked (a skill name only once the
catalog knows the skill); ``tests/surfaces/test_telemetry.py`` plants a canary in arguments,
environment and file content and greps every exported attribute for it.

Exporters (the optional ``skillmcp[otel]`` extra): OTLP over HTTP/protobuf (the standard
``OTEL_*`` variables, read from ``Settings.environ``), OTLP JSON lines appended to a file
(``SKILL_MCP_OTEL_FILE``: the appliance's way out, since its server uid has no network), and a
Prometheus scrape endpoint (``serve --http --metrics``), rendered from this process's own
registry. docs/configuration.md lists every variable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from skill_mcp.telemetry_config import TelemetryConfig, config_from_environ

log = logging.getLogger("skill_mcp.telemetry")

__all__ = ["OPERATION_BUCKETS", "Telemetry", "TelemetryConfig", "clean", "config_from_environ"]

SCOPE = "skill_mcp"
# The MCP conventions' advice for mcp.server.operation.duration and session duration (seconds).
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
SESSION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400)
BUILD_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
AttrValue = str | bool | int | float


def clean(attributes: Mapping[str, Any]) -> dict[str, AttrValue | tuple[str, ...]]:
    """Only scalar values and tuples of strings, None dropped: nothing structured is exported."""
    out: dict[str, AttrValue | tuple[str, ...]] = {}
    for key, value in attributes.items():
        if isinstance(value, (str, bool, int, float)):
            out[key] = value
        elif isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
            out[key] = tuple(value)
    return out


@dataclass(slots=True)
class Outcome:
    """What the request's handler learnt, set on the span and the duration when the request ends."""

    attributes: dict[str, Any] = field(default_factory=dict)
    name: str | None = None  # a better span name learnt by answering (a prompt that exists)
    error_type: str | None = None
    error_message: str | None = None
    is_error: bool = False  # span status ERROR (a failed tool call, an internal error)


class Telemetry:
    """One process's tracer and meters. Built by ``create``; ``shutdown`` flushes (bounded)."""

    def __init__(
        self,
        config: TelemetryConfig,
        *,
        span_exporters: Iterable[Any] = (),
        metric_readers: Iterable[Any] = (),
        prometheus: bool = False,
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from skill_mcp import __version__

        self.config = config
        resource = Resource.create(
            {**config.resource, "service.name": config.service_name, "service.version": __version__}
        )
        self._tracer_provider = TracerProvider(resource=resource)
        exporters = list(span_exporters)
        readers = list(metric_readers)
        if config.traces_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(
                OTLPSpanExporter(
                    endpoint=config.traces_endpoint, headers=dict(config.traces_headers), timeout=config.timeout_s
                )
            )
        if config.metrics_endpoint:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            readers.append(
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(
                        endpoint=config.metrics_endpoint, headers=dict(config.metrics_headers), timeout=config.timeout_s
                    ),
                    export_interval_millis=config.export_interval_ms,
                )
            )
        if config.file_path:
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            from skill_mcp.telemetry_file import OtlpJsonFile

            sink = OtlpJsonFile(config.file_path)
            exporters.append(sink.span_exporter())
            readers.append(
                PeriodicExportingMetricReader(sink.metric_exporter(), export_interval_millis=config.export_interval_ms)
            )
        self._registry: Any = None
        if prometheus:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            # This server's own registry: the scrape shows these metrics and nothing a library
            # registered process-wide.
            self._registry = CollectorRegistry(auto_describe=True)
            readers.append(PrometheusMetricReader(registry=self._registry))
        for exporter in exporters:
            self._tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        self._meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self._propagator = TraceContextTextMapPropagator()
        self.tracer = self._tracer_provider.get_tracer(SCOPE, __version__)
        self._instruments(self._meter_provider.get_meter(SCOPE, __version__))
        self._lock = threading.Lock()
        self._catalog_view: tuple[int, dict[str, int]] | None = None
        self._connections: list[Callable[[], int]] = []
        for item in config.ignored:
            log.warning(
                "an OpenTelemetry setting is not supported here and is ignored",
                extra={"event": "otel-setting-ignored", "setting": item},
            )

    @classmethod
    def create(cls, environ: Mapping[str, str], *, prometheus: bool = False) -> Telemetry:
        return cls(config_from_environ(environ), prometheus=prometheus)

    def _instruments(self, meter: Any) -> None:
        self.operation_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the server",
            explicit_bucket_boundaries_advisory=OPERATION_BUCKETS,
        )
        self.session_duration = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            description="MCP session duration as observed on the server",
            explicit_bucket_boundaries_advisory=SESSION_BUCKETS,
        )
        self.runs = meter.create_counter(
            "skill_mcp.runs", unit="{run}", description="skill_run calls by outcome (status, and reason when refused)"
        )
        self.run_duration = meter.create_histogram(
            "skill_mcp.run.duration",
            unit="s",
            description="Duration of script runs",
            explicit_bucket_boundaries_advisory=OPERATION_BUCKETS,
        )
        self.refusals = meter.create_counter(
            "skill_mcp.refusals", unit="{refusal}", description="Refused requests and tool calls by stable reason"
        )
        self.catalog_build = meter.create_histogram(
            "skill_mcp.catalog.build.duration",
            unit="s",
            description="Catalog builds (scan of every root)",
            explicit_bucket_boundaries_advisory=BUILD_BUCKETS,
        )
        self.search_build = meter.create_histogram(
            "skill_mcp.search.index.build.duration",
            unit="s",
            description="Search index builds (or opening a persisted index)",
            explicit_bucket_boundaries_advisory=BUILD_BUCKETS,
        )
        self.active_requests = meter.create_up_down_counter(
            "http.server.active_requests", unit="{request}", description="HTTP requests being served"
        )
        meter.create_observable_gauge(
            "skill_mcp.catalog.skills",
            callbacks=[self._observe_skills],
            unit="{skill}",
            description="Skills served by the current catalog",
        )
        meter.create_observable_gauge(
            "skill_mcp.catalog.problems",
            callbacks=[self._observe_problems],
            unit="{problem}",
            description="Problems the current catalog reports, by reason",
        )
        meter.create_observable_gauge(
            "skill_mcp.http.connections",
            callbacks=[self._observe_connections],
            unit="{connection}",
            description="HTTP connections open",
        )

    # -- traces ------------------------------------------------------------------------------

    def parent_from(self, meta: Mapping[str, Any] | None) -> Any:
        """The caller's trace context from a request's ``params._meta`` (W3C traceparent and
        tracestate), or None when it carries no valid one (the span then starts a trace)."""
        if not meta:
            return None
        from opentelemetry.trace import get_current_span

        carrier = {k: v for k in ("traceparent", "tracestate") if isinstance(v := meta.get(k), str)}
        if "traceparent" not in carrier:
            return None
        ctx = self._propagator.extract(carrier)
        return ctx if get_current_span(ctx).get_span_context().is_valid else None

    @contextmanager
    def server_span(
        self, name: str, attributes: Mapping[str, Any], parent: Any = None, metric_keys: Iterable[str] = ()
    ) -> Iterator[Outcome]:
        """One MCP request: a SERVER span, and its ``mcp.server.operation.duration``.

        The duration carries ``metric_keys`` of the span's attributes (low-cardinality ones).
        """
        from opentelemetry.trace import SpanKind, StatusCode

        outcome = Outcome()
        start = time.perf_counter()
        with self.tracer.start_as_current_span(
            name,
            kind=SpanKind.SERVER,
            attributes=clean(attributes),
            context=parent,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield outcome
            except BaseException as exc:
                if outcome.error_type is None:
                    outcome.error_type = type(exc).__qualname__
                    outcome.is_error = (
                        not isinstance(exc, (GeneratorExit, KeyboardInterrupt))
                        and type(exc).__name__ != "CancelledError"
                    )
                raise
            finally:
                learnt = {**outcome.attributes}
                if outcome.error_type is not None:
                    learnt["error.type"] = outcome.error_type
                span.set_attributes(clean(learnt))
                if outcome.name is not None:
                    span.update_name(outcome.name)
                if outcome.is_error:
                    span.set_status(StatusCode.ERROR, outcome.error_message)
                final = {**attributes, **learnt}
                keys = (*metric_keys, "error.type", "rpc.response.status_code")
                self.operation_duration.record(
                    time.perf_counter() - start, clean({k: final[k] for k in keys if k in final})
                )

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """A child span of whatever is current (INTERNAL); ``set(span, **attrs)`` adds to it."""
        with self.tracer.start_as_current_span(
            name, attributes=clean(attributes or {}), record_exception=False, set_status_on_exception=False
        ) as span:
            yield span

    @staticmethod
    def refused(span: Any, reason: str) -> None:
        """Mark ``span`` as ending in a refusal with its stable ``reason``."""
        from opentelemetry.trace import StatusCode

        span.set_attributes({"skill_mcp.reason": reason, "error.type": reason})
        span.set_status(StatusCode.ERROR, reason)

    # -- metrics -----------------------------------------------------------------------------

    def count_refusal(self, reason: str, attributes: Mapping[str, Any]) -> None:
        self.refusals.add(1, clean({**attributes, "skill_mcp.reason": reason}))

    def count_run(
        self, status: str, *, skill: str | None = None, reason: str | None = None, duration_s: float | None = None
    ) -> None:
        attrs = clean({"skill_mcp.run.status": status, "skill_mcp.skill": skill, "skill_mcp.reason": reason})
        self.runs.add(1, attrs)
        if duration_s is not None:
            self.run_duration.record(duration_s, attrs)

    def catalog_built(self, catalog: Any, seconds: float) -> None:
        """Called by the catalog providers after each build (``on_build``)."""
        problems: dict[str, int] = {}
        for problem in getattr(catalog, "problems", ()):
            reason = str(getattr(problem, "reason", "unknown"))
            problems[reason] = problems.get(reason, 0) + 1
        with self._lock:
            self._catalog_view = (len(getattr(catalog, "skills", {})), problems)
        self.catalog_build.record(seconds)

    def search_built(self, seconds: float) -> None:
        self.search_build.record(seconds)

    def session_ended(self, seconds: float, attributes: Mapping[str, Any]) -> None:
        self.session_duration.record(seconds, clean(attributes))

    def watch_connections(self, count: Callable[[], int]) -> None:
        """``count()`` is read at each collection (the HTTP transport's open connections)."""
        self._connections.append(count)

    def _observe_skills(self, options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        view = self._catalog_view
        return [] if view is None else [Observation(view[0])]

    def _observe_problems(self, options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        view = self._catalog_view
        return [] if view is None else [Observation(n, {"skill_mcp.reason": r}) for r, n in sorted(view[1].items())]

    def _observe_connections(self, options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [Observation(sum(count() for count in self._connections))] if self._connections else []

    # -- export ------------------------------------------------------------------------------

    @property
    def scrapes(self) -> bool:
        return self._registry is not None

    def prometheus_text(self) -> tuple[bytes, str]:
        """The scrape body and its content type (Prometheus text format)."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self._registry is None:
            raise RuntimeError("no Prometheus endpoint was configured")
        return generate_latest(self._registry), CONTENT_TYPE_LATEST

    def flush(self, timeout_s: float = 5.0) -> None:
        self._tracer_provider.force_flush(int(timeout_s * 1000))
        self._meter_provider.force_flush(int(timeout_s * 1000))

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Export what is pending and stop the exporters; never raises. Each provider's last
        export is bounded by the exporter's timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``), so a
        collector that cannot be reached holds the exit for about twice that at most."""
        try:
            self._tracer_provider.shutdown()  # the batch processor exports what it holds first
            self._meter_provider.shutdown(timeout_millis=timeout_s * 1000)
        except Exception:
            log.exception("telemetry shutdown failed", extra={"event": "otel-shutdown-failed"})
