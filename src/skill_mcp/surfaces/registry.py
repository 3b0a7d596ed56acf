"""The tool registry: what a tool is, and what its handler receives.

A tool is a ``ToolSpec`` - name, description, JSON input schema, JSON output schema and an
async handler. ``build_server`` takes the read tools this package defines plus any extra
specs the caller passes (``skill_run``, ``skill_search``), so a new tool never edits the
dispatch code in ``surfaces.tools``.

A handler is ``async def handler(call: ToolCall, args: dict) -> ToolOutput`` where ``args``
has already been validated against ``input_schema``. It returns the structured content (a
dict that must satisfy ``output_schema``), or - for the rare tool that needs the protocol
itself, such as a confirmation round trip - a ready ``mcp_types.CallToolResult`` or
``mcp_types.InputRequiredResult``. A refusal is raised as ``SkillMcpError``; the dispatcher
turns it into a tool error in one place (``surfaces.errors``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skill_mcp.config import Settings

if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog.files import DigestMemo
    from skill_mcp.models import Catalog, Problem, Skill
    from skill_mcp.surfaces.answer_bytes import AnswerBytes


class ScriptStates(Protocol):
    """What ``skill_list`` and ``skill_load`` say about declared scripts and grants.

    The runner implements this (structurally: it never imports ``surfaces``). Entries are
    plain mappings so the runner owns their content; ``surfaces`` only shapes them.

    - ``grant()`` -> ``{"grantFrom": str, "grantNote"?: str}``
    - ``scripts(skill)`` -> one mapping per declared script:
      ``{"script", "interpreter", "state", "reason"?, "detail"?, "description"?, "env"?}``
      where ``state`` is e.g. ``runnable``, ``not-granted``, ``unavailable``, ``missing``.
    - ``problems()`` -> extra problems to report beside the catalog's (grant rows that match
      nothing, an environ that could not be wiped, ...).
    - ``skill_extras(skill)`` -> ``{"unavailableScripts": [{script, interpreter, detail}],
      "ungrantedScripts": [script]}``: declared scripts this deployment cannot run, and those the
      grant leaves out, so "nothing runs" never looks like "nothing was declared". A key is
      present only when its list is not empty.

    Returned mappings may be shared between answers: callers put them into a result as they
    are and never mutate them.
    """

    def grant(self) -> Mapping[str, Any]: ...

    def scripts(self, skill: Skill) -> Sequence[Mapping[str, Any]]: ...

    def problems(self) -> Sequence[Problem]: ...

    def skill_extras(self, skill: Skill) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """Everything a tool handler may use besides its arguments.

    ``request`` is the SDK's ``ServerRequestContext`` (elicitation on handshake-era
    connections, ``protocol_version``); ``params`` the raw ``CallToolRequestParams``
    (``input_responses`` / ``request_state`` for a 2026-07-28 multi-round-trip). Only code
    inside ``surfaces`` should touch those two.
    """

    settings: Settings
    catalog: Catalog
    memo: DigestMemo
    scripts: ScriptStates
    request: Any = field(default=None, repr=False)
    params: Any = field(default=None, repr=False)
    # ``(catalog, skills) -> catalog`` with those skills read from disk again, for an answer that
    # found their file tier changed (``surfaces.state.files_checked``); None: built aside.
    refresh: Callable[[Catalog, Sequence[Skill]], Catalog] | None = field(default=None, repr=False)
    # The server's bound on the file content answers in progress hold (surfaces.answer_bytes);
    # None: a caller outside a server (nothing to share it with).
    answers: AnswerBytes | None = field(default=None, repr=False)

    def reload(self, catalog: Catalog, skills: Sequence[Skill]) -> Catalog:
        if self.refresh is not None:
            return self.refresh(catalog, skills)
        from skill_mcp.catalog.filetier import rebuilt

        return rebuilt(self.settings, catalog, skills)


ToolOutput = Any  # dict[str, Any] | mcp_types.CallToolResult | mcp_types.InputRequiredResult
ToolHandler = Callable[[ToolCall, dict[str, Any]], Awaitable[ToolOutput]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool. ``annotations`` uses the wire names (``readOnlyHint``, ``destructiveHint`` ...)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: ToolHandler = field(repr=False)
    output_schema: Mapping[str, Any] | None = None
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    # Turns the handler's result into the ``content`` blocks; default: the result as JSON text.
    # A tool whose result carries file bodies renders them once, readably, instead of twice.
    render: Callable[[dict[str, Any]], list[Any]] | None = field(default=None, repr=False)
    # The part of the handler's result that becomes ``structuredContent`` (and must satisfy
    # ``output_schema``); default: all of it. A tool that renders file bodies into ``content``
    # leaves them out here, so an answer carries each body once.
    structured: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, repr=False)
