"""Boot facts: the appliance broker is chosen from SKILL_MCP_BROKER_FD and its fence is asked about."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from skill_mcp import brokerwire as protocol
from skill_mcp.config import load_settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.runner.core import Runner, broker_refusal


class FakeBroker:
    def __init__(self, facts: dict[str, Any] | None) -> None:
        self.facts = facts

    def hello(self) -> dict[str, Any]:
        if self.facts is None:
            raise SkillMcpError(Refusal.SPAWN_FAILED, "closed")
        return self.facts


def test_a_broker_without_its_fence_refuses_every_run() -> None:
    refusal = broker_refusal(FakeBroker({"fence": False, "fenceDetail": "nft table missing"}))
    assert refusal is not None and refusal.reason == Refusal.FENCE_UNAVAILABLE and "nft" in refusal.detail
    silent = broker_refusal(FakeBroker(None))
    assert silent is not None and silent.reason == Refusal.FENCE_UNAVAILABLE


def test_a_broker_whose_kernel_cannot_confine_refuses_every_run() -> None:
    refusal = broker_refusal(FakeBroker({"fence": True, "sandbox": False, "sandboxDetail": "no Landlock (ENOSYS)"}))
    assert refusal is not None and refusal.reason == Refusal.SANDBOX_UNAVAILABLE and "Landlock" in refusal.detail
    # A broker that does not say it can confine is taken as one that cannot.
    silent = broker_refusal(FakeBroker({"fence": True}))
    assert silent is not None and silent.reason == Refusal.SANDBOX_UNAVAILABLE


def test_a_broker_with_its_fence_and_sandbox_is_accepted() -> None:  # positive control
    assert broker_refusal(FakeBroker({"fence": True, "sandbox": True})) is None


@pytest.fixture()
def broker_pair() -> Iterator[tuple[socket.socket, list[dict[str, Any]]]]:
    ours, theirs = socket.socketpair()
    seen: list[dict[str, Any]] = []

    def answer() -> None:
        message = protocol.recv(theirs, first_byte_timeout=10, frame_timeout=10)
        if message is not None:
            seen.append(message)
            protocol.send(
                theirs,
                {
                    "v": protocol.VERSION,
                    "id": message["id"],
                    "ok": True,
                    "fence": False,
                    "fenceDetail": "test: no fence",
                },
            )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield ours, seen
    finally:
        thread.join(timeout=10)
        theirs.close()


def test_boot_with_a_broker_fd_uses_the_broker_and_reports_its_fence(broker_pair: Any) -> None:
    ours, seen = broker_pair
    fd = ours.detach()
    settings = load_settings((), {"SKILL_MCP_BROKER_FD": str(fd), "PATH": "/usr/bin:/bin"})
    # The one constructor picks the broker from the settings; hardening is the server boot's job.
    booted = Runner.create(settings, harden=None, audit=lambda record: None)
    assert booted.spawner.name == "broker" and booted.fenced and booted.runs_as is None
    assert booted.boot_refusal is not None and booted.boot_refusal.reason == Refusal.FENCE_UNAVAILABLE
    assert seen and seen[0]["op"] == "hello"
    booted.spawner.sock.close()  # type: ignore[attr-defined]  # the broker spawner owns the fd now


def test_a_machine_looks_fenced_by_a_proxy_variable_or_an_egress_table() -> None:
    from skill_mcp.runner.audit import looks_fenced

    assert looks_fenced({"https_proxy": "http://127.0.0.1:3128"}, tables=lambda: [])
    assert looks_fenced({}, tables=lambda: ["skill_mcp_egress"])
    assert not looks_fenced({}, tables=lambda: ["nat", "filter"])  # positive control: ordinary host tables
    assert not looks_fenced({"HTTPS_PROXY": ""}, tables=lambda: [])


def test_a_server_with_a_broker_fd_asks_the_broker_at_boot_not_on_first_need(broker_pair: Any) -> None:
    from skill_mcp.runner.deferred import DeferredRunner

    ours, seen = broker_pair
    fd = ours.detach()
    settings = load_settings((), {"SKILL_MCP_BROKER_FD": str(fd), "PATH": "/usr/bin:/bin"})
    runner = DeferredRunner.boot(settings, audit=lambda record: None)
    assert runner.built and seen and seen[0]["op"] == "hello"  # asked before boot returned
    booted = runner.get()
    assert booted.spawner.name == "broker" and booted.boot_refusal is not None
    assert booted.boot_refusal.reason == Refusal.FENCE_UNAVAILABLE
    booted.spawner.sock.close()  # type: ignore[attr-defined]  # the broker spawner owns the fd now
