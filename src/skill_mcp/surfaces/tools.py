"""Dispatch for ``tools/list`` and ``tools/call`` over a set of ``ToolSpec``.

Adding a tool means adding a spec; nothing here changes. Arguments are validated against the
spec's input schema before the handler runs, and every ``SkillMcpError`` a handler raises
becomes a tool error through ``surfaces.errors`` - nowhere else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.errors import invalid_params, tool_error
from skill_mcp.surfaces.fastcheck import compile_accept
from skill_mcp.surfaces.registry import ToolCall, ToolSpec
from skill_mcp.surfaces.schemas import STRICT_SCHEMA_META, advertised_output
from skill_mcp.surfaces.state import SurfaceState

log = logging.getLogger("skill_mcp.tools")
_MAX_REPORTED_ERRORS = 5


class ToolTable:
    """The tools one server registers, with their compiled argument validators."""

    def __init__(self, specs: Sequence[ToolSpec], state: SurfaceState) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self._specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self._specs[spec.name] = spec
        # Arguments are first offered to a fast accept built from plain checks (``fastcheck``);
        # only what it does not accept goes to jsonschema, compiled on a tool's first such call:
        # a large import the handshake does not need, and a per-call cost it need not pay on every
        # call (bench/README.md, "Figures behind design choices"). Every spec's schema is checked by tests/surfaces/test_tool_schemas.py.
        self._accept = {spec.name: compile_accept(spec.input_schema) for spec in specs}
        self._validators: dict[str, Any] = {}
        self._state = state
        self._listing: types.ListToolsResult | None = None

    def _validator(self, name: str) -> Any:
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            validator = self._validators[name] = Draft202012Validator(self._specs[name].input_schema)
        return validator

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def listing(self) -> types.ListToolsResult:
        """The ``tools/list`` result, built once: the specs never change while serving.

        Output schemas are advertised in their shallow form (``schemas.advertised``); the
        strict ``spec.output_schema`` rides in the tool's ``_meta`` and stays the contract
        the tests hold every result to.
        """
        if self._listing is None:
            tools = []
            for spec in self._specs.values():
                strict = dict(spec.output_schema) if spec.output_schema is not None else None
                tools.append(
                    types.Tool(
                        name=spec.name,
                        title=spec.title,
                        description=spec.description,
                        input_schema=dict(spec.input_schema),
                        output_schema=advertised_output(strict) if strict is not None else None,
                        annotations=types.ToolAnnotations.model_validate(spec.annotations)
                        if spec.annotations
                        else None,
                    )
                )
                if strict is not None:
                    # Set after construction: the SDK's model takes ``_meta`` by alias only.
                    tools[-1].meta = {STRICT_SCHEMA_META: strict}
            self._listing = types.ListToolsResult(tools=tools)
        return self._listing

    def _check_arguments(self, name: str, args: dict[str, Any]) -> None:
        accept = self._accept.get(name)
        if accept is not None and accept(args):
            return
        errors = sorted(self._validator(name).iter_errors(args), key=lambda e: list(e.path))
        if not errors:
            return
        found = [{"at": "/" + "/".join(str(p) for p in e.path), "problem": e.message} for e in errors]
        raise SkillMcpError(
            Refusal.INVALID_ARGUMENTS,
            f"the arguments do not match the tool's input schema: {found[0]['problem']}",
            {"errors": found[:_MAX_REPORTED_ERRORS]},
        )

    async def call(self, request: Any, params: types.CallToolRequestParams) -> Any:
        spec = self._specs.get(params.name)
        if spec is None:
            raise invalid_params(
                SkillMcpError(
                    Refusal.UNKNOWN_TOOL,
                    f"no tool named {params.name!r} is registered",
                    {"name": params.name, "tools": self.names},
                )
            )
        args = dict(params.arguments or {})
        call = ToolCall(
            settings=self._state.settings,
            catalog=self._state.catalog(),
            memo=self._state.memo,
            scripts=self._state.scripts,
            request=request,
            params=params,
            refresh=self._state.refresh,
            answers=self._state.answers,
        )
        try:
            self._check_arguments(spec.name, args)
            out = await spec.handler(call, args)
        except SkillMcpError as err:
            log.info("tool refused", extra={"tool": spec.name, "reason": str(err.reason)})
            return tool_error(err)
        except MCPError:
            raise
        if isinstance(out, (types.CallToolResult, types.InputRequiredResult)):
            return out
        blocks = (
            spec.render(out)
            if spec.render is not None
            else [types.TextContent(type="text", text=json.dumps(out, ensure_ascii=False))]
        )
        return types.CallToolResult(
            content=blocks,
            structured_content=spec.structured(out) if spec.structured is not None else out,
        )
