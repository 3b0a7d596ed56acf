"""How ``skill-mcp call`` confirms a ``skill_run``: the way an MCP client with a person behind it does.

The CLI's client session advertises form elicitation, so the server asks mid-call with the
run's preview (``surfaces.run_tool.confirm_message``). The answer is decided here, in order:

1. ``--yes``: accept (for scripts and CI, where whoever wrote the command line has decided);
2. a person at a terminal (stdin and stderr are both terminals): show the preview on stderr,
   ask ``Run it? [y/N]`` and read one line from stdin; only ``y`` or ``yes`` accepts;
3. otherwise: decline, and say on stderr how to accept. Nothing runs.

A server that never elicits (``MCP_CONFIRM_ELICITATION=off``) answers the first call with
``confirmation-required`` and a ``confirmToken`` instead; ``client_cmds`` asks the same question
about that preview and repeats the call with the token in the same session, where the token is
valid (a token is bound to the server process that minted it, so a later ``call`` cannot redeem
it).

Only a request shaped like ``skill_run``'s (one boolean ``confirm`` field) is answered; any other
elicitation is declined, since the CLI cannot know what it asks for.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO

PROMPT = "Run it? [y/N] "
HOW_TO_ACCEPT = "not confirmed: no terminal to ask on; pass --yes to run it (nothing ran)"

Ask = Callable[[str], Awaitable[bool]]


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_ask(stdin: TextIO, stderr: TextIO) -> Ask | None:
    """An ``ask`` that shows the preview and reads y/N on the terminal; None when there is none."""
    if not (_is_tty(stdin) and _is_tty(stderr)):
        return None

    def blocking(message: str) -> bool:
        stderr.write(message.rstrip("\n") + "\n" + PROMPT)
        stderr.flush()
        line = stdin.readline()
        return line.strip().lower() in ("y", "yes")

    async def ask(message: str) -> bool:
        import anyio

        # stdin is read in a worker thread so the session keeps answering pings meanwhile.
        return await anyio.to_thread.run_sync(blocking, message, abandon_on_cancel=True)

    return ask


@dataclass(frozen=True, slots=True)
class Confirmer:
    """The CLI's answer to "run this?": ``assume_yes`` (``--yes``), else ``ask``, else no."""

    assume_yes: bool
    ask: Ask | None
    stderr: TextIO = sys.stderr

    @classmethod
    def for_process(cls, assume_yes: bool) -> Confirmer:
        return cls(assume_yes=assume_yes, ask=terminal_ask(sys.stdin, sys.stderr))

    async def decide(self, message: str) -> bool:
        if self.assume_yes:
            self.stderr.write(message.rstrip("\n") + "\n(accepted by --yes)\n")
            return True
        if self.ask is not None:
            return await self.ask(message)
        self.stderr.write(message.rstrip("\n") + "\n" + HOW_TO_ACCEPT + "\n")
        return False

    async def elicit(self, context: Any, params: Any) -> Any:
        """The SDK client's ``elicitation_callback``."""
        import mcp_types as types

        schema = getattr(params, "requested_schema", None) or {}
        properties = schema.get("properties") or {}
        if set(properties) != {"confirm"} or properties["confirm"].get("type") != "boolean":
            self.stderr.write("skill-mcp: the server asked something this command line cannot answer; declined\n")
            return types.ElicitResult(action="decline")
        if await self.decide(params.message):
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")
