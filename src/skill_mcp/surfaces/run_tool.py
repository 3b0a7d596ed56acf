"""The ``skill_run`` tool: the fence's protocol face, and the confirmation glue.

Every check that does not need the user runs first (``Runner.prepare``). Then one of three
confirmations, chosen per call:

* handshake era, client declared form elicitation, ``MCP_CONFIRM_ELICITATION`` not ``off``:
  an ``elicitation/create`` mid-call;
* 2026-07-28 era, same conditions: an ``InputRequiredResult`` carrying the elicitation, and
  the run happens on the client's retry that carries the accepted response;
* otherwise the token round trip: the first call returns ``confirmation-required`` with
  ``preview.willRun`` and a ``confirmToken``; a repeat call with the same arguments and that
  token runs the script once.

In all three the approval is a token bound to the previewed plan (the 2026-07-28
``requestState`` is that token), and the plan is rebuilt and compared right before the run,
so a script edited while the user was reading the prompt is refused as ``DRAFT_CHANGED``.
Declined or cancelled: nothing runs (``declined``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError, NoBackChannelError

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces import run_outputs
from skill_mcp.surfaces.registry import ToolCall, ToolHandler, ToolOutput, ToolSpec

if TYPE_CHECKING:  # pragma: no cover - typing only: the runner is imported when it is built
    from skill_mcp.runner.core import Runner
    from skill_mcp.runner.plan import Prepared
    from skill_mcp.telemetry import Telemetry

MODERN = "2026-07-28"
CONFIRM_KEY = "confirm"  # key of our one input request in the 2026-07-28 round trip

DESCRIPTION = (
    "Run a script that a skill declares in its mcp-host: block, inside an execution fence. It always asks "
    "first: either the user confirms in the client, or the first call returns status "
    "'confirmation-required' with preview.willRun (exactly what would run) and a confirmToken; call again "
    "with the same skill, script and args plus confirmToken to run it once. A non-zero exit is a normal "
    "result with exitCode, stdout and stderr. Only declared scripts run; skill_list shows which are runnable."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skill": {"type": "string", "description": "the skill's name, as skill_list shows it"},
        "script": {"type": "string", "description": "the declared script path, relative to the skill"},
        "args": {
            "type": "array",
            "items": {"type": "string"},
            "description": "arguments passed verbatim (no shell); at most 64, 64 KiB in total",
        },
        "confirmToken": {"type": "string", "description": "the token from the confirmation-required preview"},
    },
    "required": ["skill", "script"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["confirmation-required", "ok", "error", "timeout", "killed"]},
        # confirmation-required
        "preview": {"type": "object", "properties": {"willRun": {"type": "object"}}, "required": ["willRun"]},
        "confirmToken": {"type": "string"},
        "howToConfirm": {"type": "string"},
        # a run
        "skill": {"type": "string"},
        "script": {"type": "string"},
        "exitCode": {"type": ["integer", "null"]},
        "signal": {"type": ["string", "null"]},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {"type": "object", "properties": {"stdout": {"type": "boolean"}, "stderr": {"type": "boolean"}}},
        "droppedBytes": {"type": "integer", "minimum": 0},
        "durationMs": {"type": "integer", "minimum": 0},
        "notes": {"type": "array", "items": {"type": "string"}},
        # what the fence allowed and refused (appliance), or that there is none (standalone)
        "egress": {
            "type": "object",
            "properties": {
                "fenced": {"type": "boolean"},
                "detail": {"type": "string"},
                "allowed": {"type": "array", "items": {"type": "string"}},
                "refused": {"type": "array", "items": {"type": "string"}},
                "directDropped": {"type": ["integer", "null"]},
                "directDroppedAtLeast": {"type": "boolean"},
            },
        },
        # the files the script left in SKILL_OUTPUT_DIR, each also a resource_link in content
        "outputs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "uri": {"type": "string"},
                    "name": {"type": "string"},
                    "path": {"type": "string"},
                    "mimeType": {"type": "string"},
                    "size": {"type": "integer", "minimum": 0},
                    "sha256": {"type": "string"},
                },
                "required": ["uri", "path", "size", "sha256"],
            },
        },
        "outputsDropped": {
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 0},
                "complete": {"type": "boolean"},
                "first": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"path": {"type": "string"}, "why": {"type": "string"}}},
                },
            },
        },
    },
    "required": ["status"],
}

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {
            "type": "boolean",
            "title": "Run it",
            "default": True,
            "description": "Run exactly the script shown",
        }
    },
}


def _form_elicitation(call: ToolCall) -> bool:
    if not call.settings.confirm_elicitation or call.request is None:
        return False
    caps = getattr(call.request.session, "client_capabilities", None)
    elicitation = getattr(caps, "elicitation", None) if caps is not None else None
    if elicitation is None:
        return False
    # An empty ``elicitation: {}`` (2025-06-18) meant form mode; later clients name the modes.
    return elicitation.form is not None or elicitation.url is None


HOW_TO_CONFIRM = "call skill_run again with the same skill, script and args plus this confirmToken"
RUN_STATUSES = frozenset({"ok", "error", "timeout", "killed"})


def _over_http(call: ToolCall) -> bool:
    """The SDK hands a handler the HTTP request it came in (None over stdio)."""
    return call.request is not None and getattr(call.request, "request", None) is not None


def confirm_message(will_run: dict[str, Any]) -> str:
    env = ", ".join(f"{e['name']} ({e['from']})" for e in will_run["env"])
    lines = [
        f"Run {will_run['interpreter']} script {will_run['script']} of skill {will_run['skill']}?",
        f"argv: {json.dumps(will_run['argv'], ensure_ascii=False)}",
        f"cwd: {will_run['cwd']}",
        f"timeout: {will_run['timeoutSeconds']:g} s",
        f"variables handed (names only): {env}",
        "egress hosts: "
        + (", ".join(f"{h['host']} (declared by {h['declaredBy']})" for h in will_run["egress"]) or "none declared"),
        f"script digest: {will_run['scriptDigest']}",
    ]
    if will_run.get("runsAs"):
        lines.append(f"runs as: {will_run['runsAs']}")
    if will_run.get("envWarning"):
        lines.append(f"WARNING: {will_run['envWarning']}")
    return "\n".join(lines)


def _accepted(action: str | None, content: dict[str, Any] | None) -> bool:
    return action == "accept" and (content or {}).get("confirm", True) is not False


def _declined(action: str | None) -> SkillMcpError:
    return SkillMcpError(
        Refusal.DECLINED,
        f"the user did not confirm (elicitation {action or 'failed'}); nothing ran",
        {"action": action},
    )


def _plan_attributes(prepared: Prepared) -> dict[str, Any]:
    """Names and the digest of what will run: checked by ``prepare``, so never client input."""
    plan = prepared.plan
    return {
        "skill_mcp.skill": plan.skill,
        "skill_mcp.script": plan.script,
        "skill_mcp.script.digest": plan.script_digest,
        "skill_mcp.run.interpreter": plan.interpreter,
        "skill_mcp.run.egress.hosts": tuple(plan.egress),
    }


def _result_attributes(out: Mapping[str, Any]) -> dict[str, Any]:
    """The run's outcome: status, exit code, signal, duration, truncation, and the egress report's
    host lists when the spawner gives one. Never stdout, stderr or anything the script printed."""
    cut = out.get("truncated")
    truncated: Mapping[str, Any] = cut if isinstance(cut, Mapping) else {}
    attrs: dict[str, Any] = {
        "skill_mcp.run.status": out.get("status"),
        "process.exit.code": out.get("exitCode"),
        "skill_mcp.run.signal": out.get("signal"),
        "skill_mcp.run.duration_ms": out.get("durationMs"),
        "skill_mcp.run.truncated.stdout": truncated.get("stdout"),
        "skill_mcp.run.truncated.stderr": truncated.get("stderr"),
        "skill_mcp.run.dropped_bytes": out.get("droppedBytes"),
    }
    egress = out.get("egress")
    if isinstance(egress, Mapping):
        for key, hosts in egress.items():
            if isinstance(key, str) and isinstance(hosts, list) and all(isinstance(h, str) for h in hosts):
                attrs[f"skill_mcp.run.egress.{key}"] = tuple(hosts)
    return attrs


class SkillRun:
    """The handler, bound to one ``Runner`` (and, when telemetry is on, its spans and counts)."""

    def __init__(self, runner: Runner, telemetry: Telemetry | None = None) -> None:
        self.runner = runner
        self.telemetry = telemetry

    def _span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Any:
        return nullcontext(None) if self.telemetry is None else self.telemetry.span(name, attributes)

    @contextmanager
    def _refusals(self, span: Any) -> Iterator[None]:
        try:
            yield
        except SkillMcpError as exc:
            if span is not None and self.telemetry is not None:
                self.telemetry.refused(span, str(exc.reason))
            raise

    def _prepare(self, call: ToolCall, args: dict[str, Any]) -> Prepared:
        with self._span("skill_run prepare") as span, self._refusals(span):
            prepared = self.runner.prepare(call.catalog, args["skill"], args["script"], args.get("args", []))
            if span is not None:
                span.set_attributes(_plan_attributes(prepared))
            return prepared

    async def _execute(self, prepared: Prepared, *, token: str, via: str, scope: str | None) -> dict[str, Any]:
        attrs = {**_plan_attributes(prepared), "skill_mcp.confirmation": via}
        with self._span("skill_run run", attrs) as span, self._refusals(span):
            out = await self.runner.execute(prepared, token=token, scope=scope)
            if span is not None and self.telemetry is not None:
                from skill_mcp.telemetry import clean

                span.set_attributes(clean(_result_attributes(out)))
                if out.get("status") != "ok":
                    from opentelemetry.trace import StatusCode

                    span.set_status(StatusCode.ERROR, str(out.get("status")))
            return out

    async def __call__(self, call: ToolCall, args: dict[str, Any]) -> ToolOutput:
        if self.telemetry is None:
            return await self._call(call, args)
        start = time.perf_counter()
        try:
            out = await self._call(call, args)
        except SkillMcpError as exc:
            self.telemetry.count_run("refused", reason=str(exc.reason))
            raise
        status = out.get("status") if isinstance(out, dict) else "input-required"
        skill = out.get("skill") if isinstance(out, dict) and status in RUN_STATUSES else None
        self.telemetry.count_run(
            str(status),
            skill=skill if isinstance(skill, str) else None,
            duration_s=time.perf_counter() - start if status in RUN_STATUSES else None,
        )
        return out

    async def _call(self, call: ToolCall, args: dict[str, Any]) -> ToolOutput:
        out = await self._answer(call, args)
        if isinstance(out, dict) and out.get("outputs"):
            out = run_outputs.describe(out, self.runner.outputs)
        if _over_http(call) and isinstance(out, dict) and out.get("status") in RUN_STATUSES:
            # The answer may have to travel as one server-sent event (always after a mid-call
            # confirmation): cut the output to what a client accepts rather than lose the result.
            from skill_mcp.surfaces.http.events import fit_run_output

            out = fit_run_output(out)
        return out

    async def _answer(self, call: ToolCall, args: dict[str, Any]) -> ToolOutput:
        prepared = self._prepare(call, args)
        token = args.get("confirmToken")
        if token is not None:
            return await self._execute(prepared, token=token, via="token", scope=run_outputs.output_scope(call.request))
        params = call.params
        if params is not None and (params.input_responses or params.request_state):
            return await self._modern_retry(prepared, params, call)
        if not _form_elicitation(call):
            return self._preview(prepared)
        if call.request.protocol_version == MODERN:
            return self._modern_ask(prepared)
        return await self._handshake(call, args, prepared)

    def _modern_ask(self, prepared: Prepared) -> types.InputRequiredResult:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=confirm_message(dict(prepared.will_run)), requested_schema=CONFIRM_SCHEMA
            )
        )
        return types.InputRequiredResult(
            input_requests={CONFIRM_KEY: request}, request_state=self.runner.confirmation_token(prepared)
        )

    def _preview(self, prepared: Prepared) -> dict[str, Any]:
        return {**self.runner.preview(prepared), "howToConfirm": HOW_TO_CONFIRM}

    async def _modern_retry(self, prepared: Prepared, params: Any, call: ToolCall) -> dict[str, Any]:
        response = (params.input_responses or {}).get(CONFIRM_KEY)
        action = getattr(response, "action", None)
        with (
            self._span(
                "skill_run confirmation",
                {"skill_mcp.confirmation": "input-response", "skill_mcp.confirmation.action": str(action)},
            ) as span,
            self._refusals(span),
        ):
            if not _accepted(action, getattr(response, "content", None)):
                raise _declined(action)
            if not params.request_state:
                raise SkillMcpError(Refusal.TOKEN_INVALID, "the retry carries no requestState")
        # ``prepared`` was built by this retry; the token in requestState is bound to the plan
        # the user saw, so a script edited since is refused as draft-changed.
        return await self._execute(
            prepared, token=params.request_state, via="input-response", scope=run_outputs.output_scope(call.request)
        )

    async def _handshake(self, call: ToolCall, args: dict[str, Any], prepared: Prepared) -> ToolOutput:
        token = self.runner.confirmation_token(prepared)
        with (
            self._span("skill_run confirmation", {"skill_mcp.confirmation": "elicitation"}) as span,
            self._refusals(span),
        ):
            try:
                result = await call.request.session.elicit_form(
                    confirm_message(dict(prepared.will_run)), CONFIRM_SCHEMA, related_request_id=call.request.request_id
                )
            except NoBackChannelError:
                return self._preview(prepared)  # no way to ask mid-call: fall back to the token flow
            except MCPError as exc:
                raise SkillMcpError(
                    Refusal.DECLINED, f"the confirmation prompt failed ({exc.error.message}); nothing ran"
                ) from None
            if span is not None:
                span.set_attribute("skill_mcp.confirmation.action", str(result.action))
            if not _accepted(result.action, result.content):
                raise _declined(result.action)
        return await self._execute(
            self._prepare(call, args), token=token, via="elicitation", scope=run_outputs.output_scope(call.request)
        )


def run_tool_spec(runner: Runner, telemetry: Telemetry | None = None) -> ToolSpec:
    return _spec(SkillRun(runner, telemetry))


def deferred_run_tool_spec(get_runner: Callable[[], Runner], telemetry: Telemetry | None = None) -> ToolSpec:
    """``skill_run`` whose runner ``get_runner`` returns (building it on the first call)."""

    async def handler(call: ToolCall, args: dict[str, Any]) -> ToolOutput:
        return await SkillRun(get_runner(), telemetry)(call, args)

    return _spec(handler)


def _spec(handler: ToolHandler) -> ToolSpec:
    return ToolSpec(
        name="skill_run",
        title="Run a declared skill script",
        description=DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
        handler=handler,
        render=run_outputs.render_run,
        annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True},
    )
