"""``skill_list`` and ``skill_search`` answered before the SDK is imported (``surfaces.stdio.early``).

A ``tools/call`` of either tool is answered here with the very handlers the SDK server calls
(``read_tools.skill_list``, the handler of ``search_tool.search_tool_spec``), over the same
catalog provider, script states and ``SearchState`` instances the SDK server is composed with
(``server.serve_stdio_early`` builds them once, before the loading thread starts): the scan,
the runner's facts and the search index built for an early answer are the ones the SDK server
then serves from, never built twice.

The result is assembled as ``surfaces.tools.ToolTable.call`` assembles it (the argument check,
the handler, a ``SkillMcpError`` as an ``isError`` result with its ``reason``, the one text
block the tool's renderer makes, the handler's dict as ``structuredContent``) and written as
the SDK server writes it: its wire form (``content``, ``isError``, ``structuredContent``) in
compact JSON, UTF-8 unescaped. ``tests/surfaces/test_early_calls.py`` holds the bytes equal to
the SDK server's.

Only the plain form is answered: params with ``name`` and an optional ``arguments`` object the
tool's quick check accepts (``surfaces.fastcheck``; what it does not accept goes to the SDK
server, whose jsonschema check answers it). Anything else is None and ends the early phase:
``_meta``, a float the SDK would write in another form (an exponent, not a number), a string
that is not UTF-8, a handler that would have to wait for a worker thread, an error that is not
a refusal. Stdlib only at import, as ``early`` is.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from skill_mcp.errors import SkillMcpError
from skill_mcp.surfaces.fastcheck import compile_accept
from skill_mcp.surfaces.read_tools import read_tools
from skill_mcp.surfaces.registry import ToolCall, ToolSpec
from skill_mcp.surfaces.render import skill_list_text
from skill_mcp.surfaces.search_tool import NAME as SEARCH
from skill_mcp.surfaces.search_tool import SearchState, hits_text, search_tool_spec
from skill_mcp.surfaces.state import SurfaceState
from skill_mcp.surfaces.stdio.load_gate import Gate

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.models import Catalog

log = logging.getLogger("skill_mcp.tools")  # the tool table's logger: a refusal is logged as it logs it

LIST = "skill_list"
_PARAM_KEYS = frozenset({"name", "arguments"})


class NotPlain(Exception):
    """The call cannot be answered here; the SDK server answers it."""


def run_now(awaitable: Awaitable[Any]) -> Any:
    """The value of ``awaitable`` when it finishes without waiting on anything (no event loop
    here); ``NotPlain`` when it would wait (it is closed unfinished)."""
    steps = awaitable.__await__()
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    raise NotPlain("the handler would wait")


# A float Python writes with an exponent (``1e-06``, ``1e+16``): the SDK writes those in another
# form (``1e-6``), every other finite float alike. Looked for in the written text, where it can
# only be a float or the same characters inside a string: a string like that sends the answer to
# the SDK server too, which is safe (never a different answer, only a slower one), and rare.
EXPONENT = re.compile(r"[0-9]e[-+][0-9]")
_DIGITS = frozenset("0123456789")


def has_exponent(out: str) -> bool:
    """``EXPONENT.search(out) is not None``, found from each ``e-`` and ``e+`` (``str.find`` runs
    in C over the whole text; the regex stepped through a 97 KB page in 0.6 ms of its 2.4)."""
    for sign in ("e-", "e+"):
        at = out.find(sign, 1)
        while at >= 0:
            if out[at - 1] in _DIGITS and out[at + 2 : at + 3] in _DIGITS:
                return True
            at = out.find(sign, at + 1)
    return False


def wire_result(text: str, structured: dict[str, Any], *, is_error: bool) -> str:
    """A ``CallToolResult`` with one text block, as the SDK server writes it on the wire
    (its keys in the SDK's order; compact; UTF-8 unescaped). Raises ``NotPlain`` for what the
    SDK would write in another form."""
    result = {"content": [{"text": text, "type": "text"}], "isError": is_error, "structuredContent": structured}
    try:
        out = json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # NaN: ValueError
        out.encode("utf-8")
    except (TypeError, ValueError) as err:  # UnicodeEncodeError is a ValueError
        raise NotPlain(str(err)) from None
    if has_exponent(out):
        raise NotPlain("a float the SDK writes in another form")
    return out


def refusal_result(err: SkillMcpError) -> str:
    """``surfaces.errors.tool_error`` on the wire."""
    payload = err.to_dict()
    return wire_result(f"{err.reason}: {err.detail}\n{json.dumps(payload, ensure_ascii=False)}", payload, is_error=True)


class EarlyCalls:
    """``tools/call`` of ``skill_list`` and ``skill_search`` over the shared server state."""

    def __init__(self, state: SurfaceState, search: SearchState, gate: Gate | None = None) -> None:
        self._state = state
        self._search = search
        self.gate = gate or Gate()
        listing = next(spec for spec in read_tools() if spec.name == LIST)
        self._specs: dict[str, ToolSpec] = {LIST: listing, SEARCH: search_tool_spec(search)}
        self._texts: dict[str, Callable[[dict[str, Any]], str]] = {LIST: skill_list_text, SEARCH: hits_text}
        self._accept = {name: compile_accept(spec.input_schema) for name, spec in self._specs.items()}

    def answer(self, params: Any) -> str | None:
        """The result JSON for ``params`` of a ``tools/call``, or None: not answered here."""
        if not isinstance(params, dict) or not set(params) <= _PARAM_KEYS or "name" not in params:
            return None
        spec = self._specs.get(params["name"]) if isinstance(params["name"], str) else None
        args = params.get("arguments", {})
        accept = self._accept.get(spec.name) if spec is not None else None
        if spec is None or accept is None or not isinstance(args, dict) or not accept(args):
            return None
        with self.gate.busy():
            try:
                return self._call(spec, dict(args))
            except NotPlain:
                return None
            except Exception:  # not a refusal: the SDK server meets it again and answers as it does
                log.debug("an early tool call was left to the SDK server", exc_info=True)
                return None

    def _call(self, spec: ToolSpec, args: dict[str, Any]) -> str:
        state = self._state
        call = ToolCall(
            settings=state.settings,
            catalog=state.catalog(),
            memo=state.memo,
            scripts=state.scripts,
            refresh=state.refresh,
        )
        if spec.name == SEARCH:
            self._index(call.catalog)
        try:
            out = run_now(spec.handler(call, args))
        except SkillMcpError as err:
            log.info("tool refused", extra={"tool": spec.name, "reason": str(err.reason)})
            return refusal_result(err)
        return wire_result(self._texts[spec.name](out), out, is_error=False)

    def _index(self, catalog: Catalog) -> None:
        """The index the search handler would build in a worker thread, built in this one (the
        handler then finds it built and answers without waiting)."""
        if self._search.built_for(catalog) is None:
            self._search.index_for(catalog)
