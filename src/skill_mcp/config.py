"""One frozen settings object, built once from the command line and the environment.

Nothing else in the package reads ``os.environ`` for configuration: the surfaces, the
runner and the catalog receive a ``Settings``. (The runner still *hands* declared variables
from the environment to scripts; that is data, not configuration, and goes through
``Settings.environ``.)

Every variable read here is listed in ``docs/configuration.md``; a test enforces it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# HOSTED_MARKERS: variables whose presence means a host (mcp-host's runner) started this
# process. Their presence can only move defaults toward fail-closed; it never opens anything.
# Defined with the grant rules (``grantrules.is_hosted``, ``grantrules.grant_source``) because the
# appliance's broker decides "hosted" and the grant source from them too.
from skill_mcp.grantrules import HOSTED_MARKERS, GrantSource, grant_source, is_hosted

__all__ = ["ENV_VARS", "HOSTED_MARKERS", "Settings", "load_settings"]

# Every environment variable the server itself reads, with a one-line meaning. docs/
# must describe each (tests/test_docs.py).
ENV_VARS: Mapping[str, str] = {
    "SKILLS_DIR": "skill roots, separated by ':'",
    "MCP_SKILLS_PATH": "the hosted read-only skills slot (also marks the process as hosted)",
    "MCP_HOST_METER_FILE": "set by mcp-host's runner; marks the process as hosted",
    "MCP_DATA_DIR": "writable data directory set by the host; handed to scripts; marks hosted",
    "MCP_BLOB_BASE_URL": "set by mcp-host's runner; marks the process as hosted",
    "MCP_SKILL_RUN": "the owner's grants: which declared scripts may run, with which variables and hosts",
    "MCP_CONFIRM_ELICITATION": "'off' disables elicitation; confirmation then uses the token round trip",
    "MCP_SKILL_ALLOW_UNSCRUBBED": "'1' lets a hosted server run scripts although the environ wipe failed",
    "SKILL_MCP_UNCONFINED": "'1' lets a standalone (not hosted) server run scripts without a kernel sandbox where the kernel cannot confine them",
    "MCP_ENABLED_TOOLS": "comma list narrowing the registered tools; also hides prompts and resources",
    "SKILL_MCP_COMPAT": "'skillmcp' also offers list_packs, search_skills, get_skill, the tools of the earlier skillmcp interface, for prompts written against those names",
    "MCP_HTTP_TOKEN": "bearer token required by the HTTP transport",
    "SKILL_MCP_SCRIPT_USER": "user (name or uid) scripts drop to when the standalone server runs as root",
    "SKILL_MCP_LOG": "log level (debug, info, warning, error); logs are JSON lines on stderr",
    "SKILL_MCP_BROKER_FD": "set by the container launcher: the socket to the spawn-broker",
    "SKILL_MCP_BROKER_HOLDS": "set by the container launcher: names of granted variables whose values it keeps for scripts",
    "SKILL_MCP_CACHE": "'off' turns the persistent catalog cache off (default on)",
    "SKILL_MCP_CACHE_DIR": "directory of the persistent catalog cache (default $XDG_CACHE_HOME/skill-mcp)",
    "XDG_CACHE_HOME": "the user's cache directory; the catalog cache goes to its skill-mcp/ (default ~/.cache)",
    "SKILL_MCP_METRICS": "serve --http: a Prometheus scrape endpoint, a PATH on the MCP port or its own HOST:PORT",
    "SKILL_MCP_OTEL_FILE": "append spans and metrics as OTLP JSON lines to this file (the appliance's sidecar path)",
    "OTEL_SDK_DISABLED": "'true' turns every OTLP and file export off",
    "OTEL_SERVICE_NAME": "service.name of spans and metrics (default skill-mcp)",
    "OTEL_RESOURCE_ATTRIBUTES": "extra resource attributes, key=value,key=value",
    "OTEL_TRACES_EXPORTER": "'otlp' exports spans, 'none' does not (default: otlp when an endpoint is set)",
    "OTEL_METRICS_EXPORTER": "'otlp' exports metrics, 'none' does not (default: otlp when an endpoint is set)",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "OTLP/HTTP base URL; /v1/traces and /v1/metrics are appended",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "OTLP/HTTP URL for spans, used as is",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "OTLP/HTTP URL for metrics, used as is",
    "OTEL_EXPORTER_OTLP_HEADERS": "headers sent with every export, key=value,key=value (URL-encoded values)",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "headers for span exports, added to OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "headers for metric exports, added to OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "only http/protobuf is supported; another value turns the export off, with a warning",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "as OTEL_EXPORTER_OTLP_PROTOCOL, for spans",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "as OTEL_EXPORTER_OTLP_PROTOCOL, for metrics",
    "OTEL_EXPORTER_OTLP_TIMEOUT": "milliseconds one export may take (default 10000)",
    "OTEL_METRIC_EXPORT_INTERVAL": "milliseconds between metric exports over OTLP or to the file (default 60000)",
}

BUNDLED_ROOT = Path(__file__).resolve().parent / "bundled"


@dataclass(frozen=True, slots=True)
class Settings:
    roots: tuple[Path, ...]
    roots_from: str  # "--skills-dir", "SKILLS_DIR", "MCP_SKILLS_PATH", "SKILLS_DIR+MCP_SKILLS_PATH" or "bundled"
    hosted: bool
    enabled_tools: frozenset[str] | None = None
    compat: str | None = None  # SKILL_MCP_COMPAT: a tool profile offered beside ours ("skillmcp")
    skill_run: str | None = None  # raw MCP_SKILL_RUN; parsed by runner.grants
    confirm_elicitation: bool = True
    allow_unscrubbed: bool = False
    # SKILL_MCP_UNCONFINED=1: where the kernel cannot confine a run, a standalone server runs its
    # scripts without the sandbox (and warns) instead of refusing them. Never honoured when hosted.
    allow_unconfined: bool = False
    data_dir: Path | None = None
    script_user: str | None = None
    broker_fd: int | None = None
    # Granted variables the appliance's launcher holds: set there, but their values never reach
    # this process (previews show them as present; the broker hands them to the script).
    broker_holds: frozenset[str] = frozenset()
    log_level: str = "info"
    watch: bool = False
    # Where the persistent catalog cache lives (catalog.cache); None: no cache.
    cache_dir: Path | None = None
    # SKILL_MCP_METRICS: the Prometheus endpoint of ``serve --http`` (``--metrics`` wins); None: none.
    metrics: str | None = None
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def narrowed(self) -> bool:
        return self.enabled_tools is not None

    @property
    def grant_source(self) -> GrantSource:
        """Where this process's grants come from (``grantrules.grant_source``, the broker's rule too)."""
        return grant_source(self.skill_run, hosted=self.hosted)


def _split_roots(value: str | None) -> list[Path]:
    if not value:
        return []
    return [Path(p).expanduser() for p in value.split(":") if p.strip()]


def _cache_dir(env: Mapping[str, str]) -> Path | None:
    """``SKILL_MCP_CACHE_DIR``, else ``$XDG_CACHE_HOME/skill-mcp``, else ``~/.cache/skill-mcp``;
    None when ``SKILL_MCP_CACHE`` is off or no home is known."""
    if env.get("SKILL_MCP_CACHE", "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if env.get("SKILL_MCP_CACHE_DIR"):
        return Path(env["SKILL_MCP_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):  # the XDG rule: a relative value is ignored
        return Path(xdg) / "skill-mcp"
    home = env.get("HOME")
    return Path(home) / ".cache" / "skill-mcp" if home and home.startswith("/") else None


def load_settings(
    skills_dirs: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    *,
    watch: bool = False,
) -> Settings:
    """Build ``Settings`` from ``--skills-dir`` values and an environment mapping.

    Roots: ``--skills-dir`` (repeatable) when given; otherwise ``SKILLS_DIR`` entries followed
    by ``MCP_SKILLS_PATH`` entries; otherwise the bundled pack.
    """
    env = dict(os.environ if environ is None else environ)
    if skills_dirs:
        roots = [Path(p).expanduser() for p in skills_dirs]
        roots_from = "--skills-dir"
    else:
        from_skills_dir = _split_roots(env.get("SKILLS_DIR"))
        from_hosted = _split_roots(env.get("MCP_SKILLS_PATH"))
        roots = from_skills_dir + from_hosted
        roots_from = "+".join(
            name for name, part in (("SKILLS_DIR", from_skills_dir), ("MCP_SKILLS_PATH", from_hosted)) if part
        )
        if not roots:
            roots = [BUNDLED_ROOT]
            roots_from = "bundled"
    enabled = env.get("MCP_ENABLED_TOOLS")
    enabled_tools = frozenset(t.strip() for t in enabled.split(",") if t.strip()) if enabled is not None else None
    broker_fd = env.get("SKILL_MCP_BROKER_FD")
    data_dir = env.get("MCP_DATA_DIR")
    return Settings(
        roots=tuple(roots),
        roots_from=roots_from,
        hosted=is_hosted(env),
        enabled_tools=enabled_tools,
        compat=(env.get("SKILL_MCP_COMPAT") or "").strip().lower() or None,
        skill_run=env.get("MCP_SKILL_RUN"),
        confirm_elicitation=env.get("MCP_CONFIRM_ELICITATION", "").strip().lower() != "off",
        allow_unscrubbed=env.get("MCP_SKILL_ALLOW_UNSCRUBBED", "").strip() == "1",
        allow_unconfined=env.get("SKILL_MCP_UNCONFINED", "").strip() == "1",
        data_dir=Path(data_dir) if data_dir else None,
        script_user=env.get("SKILL_MCP_SCRIPT_USER") or None,
        broker_fd=int(broker_fd) if broker_fd and broker_fd.isdigit() else None,
        broker_holds=frozenset(n for n in env.get("SKILL_MCP_BROKER_HOLDS", "").split(",") if n),
        log_level=(env.get("SKILL_MCP_LOG") or "info").lower(),
        watch=watch,
        cache_dir=_cache_dir(env),
        metrics=(env.get("SKILL_MCP_METRICS") or "").strip() or None,
        environ=env,
    )
