"""``tools`` and ``call``: a real MCP client session against the real server, in process.

The server is built by ``server.build_server`` exactly as ``serve`` builds it, and the SDK's
own ``mcp.Client`` connects to it in process: every request goes through the SDK's request
validation, the server's dispatch, argument checking against the input schema and the
client's output-schema validation. Nothing here calls a handler directly.

``call`` confirms a ``skill_run`` as a client with a person behind it would (``cli.confirm``):
within its one session, so the run happens in the same call and its result is printed.

A run's output is shown as the script writes it (``runner.types.OutputTap``): the server in
this process is built with a tap on its spawner, which copies each chunk to this process's
stdout or stderr, bounded as the capture is; the status line follows when the call answers.
MCP itself carries a run's output in the result only (a progress notification holds a
number and a message, not a stream), so the tap is a property of this command line, not of
the protocol: over stdio or HTTP a client gets the same result it always did.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from skill_mcp.cli import exits
from skill_mcp.cli.confirm import Confirmer
from skill_mcp.cli.output import emit, emit_json, warn

ARGS_MAX_CHARS = 1024 * 1024
# The earlier skillmcp interface's tool names (surfaces.seed_tools), offered only with SKILL_MCP_COMPAT.
SEED_TOOLS = frozenset({"list_packs", "search_skills", "get_skill"})
BODY_TOOLS = frozenset({"skill_file", "skill_load"})  # their file text is in content, not structuredContent
CALL_TIMEOUT_S = 330.0  # above skill_run's hard 300 s ceiling, so a run always answers first


def _settings(args: argparse.Namespace) -> Any:
    from skill_mcp.cli.roots import announce
    from skill_mcp.config import load_settings

    settings = load_settings(args.skills_dirs, os.environ)
    announce(settings, json_mode=bool(getattr(args, "json", False)))
    return settings


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _audit_sink(settings: Any) -> Any:
    """The per-run audit for a person: on a terminal the status line ``call`` prints says what
    the audit line would, so the line is written (as text) only with ``SKILL_MCP_LOG=debug``, and
    other records (a warning) as text unless the level is ``error``. Off a terminal, the
    server's JSON line, for the log it goes to."""
    from skill_mcp.cli.progress import is_terminal
    from skill_mcp.runner.audit import stderr_sink

    if not is_terminal(sys.stderr):
        return stderr_sink
    level = str(settings.log_level).lower()

    def sink(record: Any) -> None:
        event = str(record.get("event", "audit"))
        if (event == "skill_run" and level != "debug") or level == "error":
            return
        fields = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("event", "detail"))
        sys.stderr.write(f"skill-mcp {event}: {record.get('detail') or ''} {fields}".rstrip() + "\n")

    return sink


class _Tap:
    """Copies a running script's output to this process's stdout and stderr as it comes, each
    stream bounded as the run's capture is (the status line says when it was cut)."""

    def __init__(self) -> None:
        from skill_mcp.runner.types import CAPTURE_LIMIT

        self.left = {"stdout": CAPTURE_LIMIT, "stderr": CAPTURE_LIMIT}
        self.used = False

    def __call__(self, stream: str, data: bytes) -> None:
        self.used = True
        keep = data[: max(self.left[stream], 0)]
        self.left[stream] -= len(keep)
        if keep:
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.flush()
            target.buffer.write(keep)
            target.buffer.flush()


def _server(settings: Any, tap: _Tap | None) -> Any:
    """The server ``serve`` would run, with this command's audit sink and output tap, and the
    first catalog build's progress on a terminal."""
    from skill_mcp.catalog.lazy import LazyCatalog
    from skill_mcp.cli.progress import Progress
    from skill_mcp.server import build_server

    provider = LazyCatalog(settings, progress=Progress.on_stderr("reading skills").update)
    return build_server(settings, provider, hooks=_hooks(settings, tap))


def _hooks(settings: Any, tap: _Tap | None) -> Any:
    from skill_mcp.server import RunHooks

    return RunHooks(audit=_audit_sink(settings), on_output=tap)


async def _advertised(settings: Any) -> dict[str, Any]:
    from mcp import Client

    async with Client(_server(settings, None), mode="legacy") as client:
        caps = client.server_capabilities
        tools = (await client.list_tools()).tools
        prompts = await _every(client.list_prompts, "prompts") if caps.prompts is not None else []
        resources = await _every(client.list_resources, "resources") if caps.resources is not None else []
        info = client.server_info
        return {
            "server": _dump(info) if info is not None else None,
            "protocolVersion": client.protocol_version,
            "capabilities": _dump(caps),
            "tools": [_dump(t) for t in tools],
            "prompts": len(prompts),
            "resources": len(resources),
        }


async def _every(lister: Any, field: str, pages: int = 10_000) -> list[Any]:
    """Every item of a paginated list, following ``nextCursor`` (bounded)."""
    items: list[Any] = []
    cursor = None
    for _ in range(pages):
        page = await lister(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def run_tools(args: argparse.Namespace) -> int:
    import anyio

    from skill_mcp.logs import configure_logging

    settings = _settings(args)
    configure_logging(settings.log_level)
    data = anyio.run(_advertised, settings)
    if args.json:
        emit_json(data)
        return exits.OK
    server = data["server"] or {}
    emit(f"server: {server.get('name')} {server.get('version')}  (protocol {data['protocolVersion']})")
    emit(f"tools ({len(data['tools'])}):")
    for tool in data["tools"]:
        hints = tool.get("annotations", {})
        mode = "read-only" if hints.get("readOnlyHint") else "may change things"
        emit(f"  {tool['name']}  [{mode}]  {' '.join(tool.get('description', '').split())[:90]}")
    caps = data["capabilities"]
    emit(f"prompts: {'yes' if 'prompts' in caps else 'no'} ({data['prompts']})")
    emit(f"resources: {'yes' if 'resources' in caps else 'no'} ({data['resources']})")
    for ext, value in sorted((caps.get("extensions") or {}).items()):
        emit(f"extension: {ext} {json.dumps(value, sort_keys=True)}")
    return exits.OK


def _parse_args_json(text: str) -> dict[str, Any]:
    if len(text) > ARGS_MAX_CHARS:
        raise exits.CliError(exits.USAGE, "--args is larger than 1 MiB")
    try:
        value = json.loads(text)
    except ValueError as err:
        raise exits.CliError(exits.USAGE, f"--args is not valid JSON: {err}") from err
    if not isinstance(value, dict):
        raise exits.CliError(exits.USAGE, "--args must be a JSON object")
    return value


def _result(result: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"isError": bool(result.is_error), "content": [_dump(c) for c in result.content]}
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    return out


def _token_preview(tool: str, out: dict[str, Any]) -> dict[str, Any] | None:
    """The ``skill_run`` preview a server without elicitation answered with, if that is what came back."""
    structured = out.get("structuredContent") or {}
    if tool != "skill_run" or out["isError"] or structured.get("status") != "confirmation-required":
        return None
    return structured if isinstance(structured.get("confirmToken"), str) else None


async def _call(
    settings: Any,
    tool: str,
    arguments: dict[str, Any],
    confirmer: Confirmer,
    tap: _Tap | None = None,
    out_dir: str | None = None,
) -> dict[str, Any]:
    import anyio
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    # The session advertises elicitation: skill_run asks in it, and ``confirmer`` answers.
    async with Client(_server(settings, tap), mode="legacy", elicitation_callback=confirmer.elicit) as client:
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                out = _result(await client.call_tool(tool, arguments))
                preview = _token_preview(tool, out)
                if preview is not None:
                    # A server that never elicits: confirm its preview here, then redeem the token in
                    # this session (the only one it is valid in).
                    from skill_mcp.surfaces.run_tool import confirm_message

                    if not await confirmer.decide(confirm_message(preview["preview"]["willRun"])):
                        return {**out, "declined": True}
                    out = _result(await client.call_tool(tool, {**arguments, "confirmToken": preview["confirmToken"]}))
                finished = _finished_run(tool, out)
                if out_dir is not None and finished is not None:
                    # Read in this session: the outputs are this server's, kept in its memory.
                    out["saved"] = await _save_outputs(client, finished.get("outputs") or [], out_dir)
        except MCPError as err:
            # A JSON-RPC error (an unknown tool, for example): refused before any tool ran.
            names = [t.name for t in (await client.list_tools()).tools]
            return {
                "isError": True,
                "content": [],
                "tools": names,
                "protocolError": {"code": err.error.code, "message": err.error.message},
            }
    return out


async def _save_outputs(client: Any, outputs: list[dict[str, Any]], out_dir: str) -> list[str]:
    """Write each output under ``out_dir`` by its path; never outside it, never through a link."""
    import base64
    import os

    import mcp_types as types

    from skill_mcp.paths import relpath_problem

    os.makedirs(out_dir, exist_ok=True)
    saved = []
    for entry in outputs:
        rel = entry.get("path", "")
        if relpath_problem(rel) is not None:
            continue
        item = (await client.read_resource(entry["uri"])).contents[0]
        data = (
            item.text.encode("utf-8") if isinstance(item, types.TextResourceContents) else base64.b64decode(item.blob)
        )
        target = os.path.join(out_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        saved.append(target)
    return saved


def _finished_run(tool: str, out: dict[str, Any]) -> dict[str, Any] | None:
    """The result of a ``skill_run`` that ran its script (whatever the script did), else None."""
    from skill_mcp.surfaces.run_tool import RUN_STATUSES

    structured = out.get("structuredContent") or {}
    if tool != "skill_run" or out["isError"] or structured.get("status") not in RUN_STATUSES:
        return None
    return structured


def _print_run(result: dict[str, Any], streamed: bool) -> None:
    """A run for a person: the script's own output as it wrote it (already shown as it came,
    when ``streamed``), then one line on how it ended."""
    if not streamed:
        sys.stdout.write(result.get("stdout") or "")
        sys.stdout.flush()
        sys.stderr.write(result.get("stderr") or "")
    ended = f"exit {result.get('exitCode')}" if result.get("signal") is None else f"signal {result.get('signal')}"
    cut = [name for name, was in sorted((result.get("truncated") or {}).items()) if was]
    warn(
        f"skill-mcp: {result.get('skill')} {result.get('script')}: {result['status']} ({ended}, "
        f"{result.get('durationMs')} ms" + (f"; {' and '.join(cut)} truncated" if cut else "") + ")"
    )
    outputs = result.get("outputs") or []
    if outputs:
        warn(
            f"skill-mcp: the script wrote {len(outputs)} file(s): "
            + ", ".join(o["path"] for o in outputs)
            + " (--out DIR saves them)"
        )


def _tool_hint(tool: str, names: list[str]) -> str:
    from difflib import get_close_matches

    close = get_close_matches(tool, names, n=3, cutoff=0.6)
    if close:
        return f"skill-mcp: no tool named {tool!r}; did you mean {', '.join(close)}?"
    return f"skill-mcp: no tool named {tool!r}; the server's tools: {', '.join(names)}"


def run_call(args: argparse.Namespace) -> int:
    import anyio

    from skill_mcp.logs import configure_logging

    arguments = _parse_args_json(args.args)
    confirmer = Confirmer.for_process(assume_yes=bool(getattr(args, "yes", False)))
    settings = _settings(args)
    configure_logging(settings.log_level)  # text on a terminal, JSON lines for a log
    # --json prints the whole result on stdout, so the script's output must not stream there.
    tap = _Tap() if args.tool == "skill_run" and not args.json else None
    try:
        out = anyio.run(_call, settings, args.tool, arguments, confirmer, tap, getattr(args, "out", None))
    except TimeoutError as err:
        raise exits.CliError(exits.UNAVAILABLE, f"{args.tool}: no answer in {CALL_TIMEOUT_S:.0f} s") from err
    tools = out.pop("tools", [])
    finished = _finished_run(args.tool, out)
    if args.json:
        emit_json(out)
    elif finished is not None:
        _print_run(finished, streamed=tap is not None and tap.used)
    elif "structuredContent" in out and args.tool not in BODY_TOOLS:
        emit(json.dumps(out["structuredContent"], indent=2, sort_keys=True, ensure_ascii=False))
    else:
        # File bodies travel in content only (structuredContent is their metadata): print them.
        for item in out["content"]:
            text = item.get("text", (item.get("resource") or {}).get("text"))
            emit(text if isinstance(text, str) else json.dumps(item, sort_keys=True))
    if not args.json and out.get("saved") is not None:
        warn(
            f"skill-mcp: saved {len(out['saved'])} output file(s) to {args.out}"
            + "".join(f"\n  {path}" for path in out["saved"])
        )
    if "protocolError" in out:
        warn(f"skill-mcp: {args.tool}: {out['protocolError']['message']} (JSON-RPC {out['protocolError']['code']})")
        if args.tool in SEED_TOOLS:
            warn(f"skill-mcp: {args.tool} is a tool of the skillmcp profile: set SKILL_MCP_COMPAT=skillmcp to offer it")
        elif args.tool not in tools:
            warn(_tool_hint(args.tool, tools))
        return exits.PROBLEM
    if out.get("declined"):
        warn(f"skill-mcp: {args.tool}: not confirmed (declined); nothing ran")
        return exits.PROBLEM
    if out["isError"]:
        reason = (out.get("structuredContent") or {}).get("reason")
        warn(f"skill-mcp: {args.tool} returned an error" + (f" ({reason})" if reason else ""))
        return exits.PROBLEM
    structured = out.get("structuredContent") or {}
    if args.tool == "skill_file" and structured.get("failed") and not structured.get("served"):
        # Every path was refused: the call answered, but nothing the caller asked for came back.
        warn(f"skill-mcp: skill_file: none of the {structured['failed']} files could be read (see each entry's error)")
        return exits.PROBLEM
    if finished is not None and finished["status"] != "ok":
        # The script failed, timed out or was killed: a normal result for the tool, but a script
        # or CI job that ran it with --yes must not read success from the exit status.
        return exits.PROBLEM
    return exits.OK
