"""Which exports the OTEL_* variables ask for (``telemetry_config``, pure): a table."""

from __future__ import annotations

import pytest

from skill_mcp.telemetry_config import config_from_environ, wanted

BASE = "http://collector:4318"


@pytest.mark.parametrize(
    ("env", "traces", "metrics"),
    [
        ({}, None, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": BASE}, f"{BASE}/v1/traces", f"{BASE}/v1/metrics"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": BASE + "/"}, f"{BASE}/v1/traces", f"{BASE}/v1/metrics"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": BASE, "OTEL_METRICS_EXPORTER": "none"}, f"{BASE}/v1/traces", None),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, "http://t/x", None),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m/y"}, None, "http://m/y"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "http://localhost:4318/v1/traces", None),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_ENDPOINT": BASE}, None, f"{BASE}/v1/metrics"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "http://localhost:4318/v1/traces", None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": BASE, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, None, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": BASE, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
            f"{BASE}/v1/traces",
            None,
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": BASE, "OTEL_SDK_DISABLED": "true"}, None, None),
    ],
)
def test_the_environment_chooses_the_otlp_endpoints(
    env: dict[str, str], traces: str | None, metrics: str | None
) -> None:
    cfg = config_from_environ(env)
    assert (cfg.traces_endpoint, cfg.metrics_endpoint) == (traces, metrics)
    assert wanted(env) is (traces is not None or metrics is not None)


def test_unsupported_settings_are_named_for_one_warning() -> None:
    cfg = config_from_environ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert "OTEL_TRACES_EXPORTER=console" in cfg.ignored
    assert any(item.startswith("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc") for item in cfg.ignored)


def test_headers_resource_and_service_name_are_read_as_the_spec_writes_them() -> None:
    cfg = config_from_environ(
        {
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,x=1",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x=2",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod",
        }
    )
    assert cfg.traces_headers == {"api-key": "a b", "x": "2"} and cfg.metrics_headers == {"api-key": "a b", "x": "1"}
    assert cfg.service_name == "from-attrs" and cfg.resource == {"deployment.environment": "prod"}
    assert (
        config_from_environ({"OTEL_SERVICE_NAME": "svc", "OTEL_RESOURCE_ATTRIBUTES": "service.name=x"}).service_name
        == "svc"
    )
    assert config_from_environ({}).service_name == "skill-mcp"


def test_the_file_export_and_the_scrape_endpoint_each_turn_telemetry_on() -> None:
    assert wanted({"SKILL_MCP_OTEL_FILE": "/telemetry/otlp.jsonl"})
    assert not wanted({"SKILL_MCP_OTEL_FILE": "/t", "OTEL_SDK_DISABLED": "true"})
    assert wanted({}, scrape=True) and not wanted({})
