"""The self-test agent: the real server in this process, driven over stdio by a second thread.

The launcher starts this module as the server (``skill_mcp_launcher.selftest``): same uid, no
capabilities, no-new-privileges, the environment the launcher gives a server. Here:

* fds 0, 1 and 2 become pipes; the main thread runs ``skill-mcp serve`` (the production
  command, in-process), so the server's boot hardening, its memory and its answers are this
  process's own, and can be examined from the inside;
* the driver thread speaks MCP to it (``wire``), makes each probe a real ``skill_run``
  (preview, then the confirmToken), and observes from the server's side (``observe``);
* a tee thread passes the server's stderr through to the container's stderr and watches it
  for the canary;
* at the end the verdicts (``verdicts``) go to the container's stdout, and the exit status
  is 0 only when nothing FAILED.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from skill_mcp.limits import PROXY_PORT
from skill_mcp.selftest import observe, verdicts
from skill_mcp.selftest.wire import Wire, WireError

WAIT_FOR_S = 300.0
UNDECLARED = "undeclared.selftest.invalid"
CLEANUP_TRIES = 120  # runs refused with cleanup-pending, one a second, before the property fails


class _Stop(Exception):
    """No further probe can run (the fence is unavailable, or the server stopped answering)."""


@dataclass(slots=True)
class Tee:
    """Copies the server's stderr to the real stderr and remembers whether the canary passed."""

    source: int
    sink: int
    facts: dict[str, Any]
    found: bool = False
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._pump, name="selftest-tee", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        prefix = self.facts["canary_prefix"].encode()
        length = len(prefix) + 32
        tail = b""
        while chunk := os.read(self.source, 65536):
            with contextlib.suppress(OSError):
                os.write(self.sink, chunk)
            window = tail + chunk
            if observe.holds_canary(window, prefix, self.facts["canary_sha256"], length):
                self.found = True
            tail = window[-length:]


@dataclass(slots=True)
class Driver:
    facts: dict[str, Any]
    wire: Wire
    report_err: int
    obs: dict[str, Any] = field(default_factory=dict)

    def run(self, mode: str, *args: str) -> dict[str, Any]:
        """One probe as a real run; its parsed JSON report, recorded under ``mode``."""
        try:
            result = self.wire.skill_run(self.facts["skill"], self.facts["script"], [mode, *args])
        except WireError as exc:
            raise _Stop(f"the server stopped answering during the {mode} probe: {exc}") from None
        record = {k: result.get(k) for k in ("status", "reason", "detail", "exitCode", "stderr")}
        record["isError"] = bool(result.get("isError"))
        if record["isError"] and result.get("reason") == "fence-unavailable":
            self.obs["fence_unavailable"] = result.get("detail")
            raise _Stop("the fence is unavailable")
        if record["isError"] and result.get("reason") == "sandbox-unavailable":
            self.obs["sandbox_unavailable"] = result.get("detail")
            raise _Stop("the kernel cannot confine a run")
        lines = str(result.get("stdout", "")).strip().splitlines()
        with contextlib.suppress(ValueError, IndexError):
            record["out"] = json.loads(lines[-1])
        self.obs["runs"][mode] = record
        out: dict[str, Any] = record.get("out") or {}
        return out

    def say(self, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.report_err, f"selftest: {text}\n".encode())

    def wait_for_go(self) -> None:
        path = self.facts.get("wait_for")
        if not path:
            return
        self.say(f"waiting for {path}")
        deadline = time.monotonic() + WAIT_FOR_S
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise _Stop(f"{path} did not appear within {WAIT_FOR_S:g} s")
            time.sleep(0.1)

    def server_side(self) -> None:
        self.obs["server"] = {
            "uid": os.getuid(),
            "status": observe.status(),
            "dumpable": observe.dumpable(),
            "environ_bytes": None,
            "sibling": observe.sibling_reads(),
            "writes": observe.write_attempts(self.facts["operator_roots"]),
            "nft": {"rc": None},
            "canary_found_in": [],
        }

    def probes(self) -> None:
        posture = self.run("posture", *self.facts["operator_roots"])
        self.obs["server"]["nft"] = observe.nft_attempt()  # after the script's own attempts
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            listener.setblocking(False)
            port = listener.getsockname()[1]
            self.obs["listener_port"] = port
            self.run("egress", str(port), UNDECLARED, self.facts["probe_host"] or "", self.facts["probe_address"] or "")
            self.obs["listener_hits"] = _accepted(listener)
        self.confinement()
        self.run("nproc")
        planted = self.run("plant", self.obs["token"])
        script_uid = posture.get("uid")
        self.obs["leftovers"] = observe.processes_of(script_uid) if isinstance(script_uid, int) else []
        # The control: the same listing sees processes of another uid (the launcher's), so an
        # empty list above means none, not a /proc that hides them (hidepid).
        self.obs["root_processes_seen"] = len(observe.processes_of(0))
        self.run("find", str(planted.get("shm_key", 0)), *planted.get("wrote", {}))
        littered = self.run("litter", self.obs["token"])
        self.obs["cleanup_refused"] = 0
        for _ in range(CLEANUP_TRIES):
            self.run("after", self.obs["token"], str(littered.get("scratch", "")))
            if self.obs["runs"]["after"].get("reason") != "cleanup-pending":
                break
            # The broker is still removing what the littering run left: the run is refused, by
            # name, until it is done. Asking again is what a client does.
            self.obs["cleanup_refused"] += 1
            time.sleep(1.0)

    def confinement(self) -> None:
        """The run's kernel sandbox, judged by what the probe could not do (and could)."""
        name = f"skill-mcp-selftest-{self.obs['token']}"
        with (
            socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as abstract,
        ):
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            listener.setblocking(False)
            abstract.bind("\0" + name)
            abstract.listen(8)
            abstract.setblocking(False)
            self.run(
                "confine",
                str(listener.getsockname()[1]),
                str(PROXY_PORT),
                name,
                str(os.getpid()),
                *self.facts["operator_roots"],
            )
            self.obs["confine_hits"] = _accepted(listener) + _accepted(abstract)

    def secret_scan(self, tee: Tee) -> None:
        prefix, sha = self.facts["canary_prefix"].encode(), self.facts["canary_sha256"]
        length = len(prefix) + 32
        found = []
        env_text = "\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()
        if observe.holds_canary(env_text, prefix, sha, length):
            found.append("environment")
        if any(observe.holds_canary(line, prefix, sha, length) for line in self.wire.seen):
            found.append("answers")
        if tee.found:
            found.append("logs")
        try:
            with observe.own_memory() as mem:
                self.obs["server"]["environ_bytes"] = observe.environ_block_bytes(mem)
                if observe.memory_holds_canary(mem, prefix, sha, length):
                    found.append("memory")
        except OSError as exc:
            self.obs["server"]["scan_error"] = str(exc)
        self.obs["server"]["canary_found_in"] = found

    def drive(self, tee: Tee) -> None:
        self.obs.update(facts=self.facts, runs={}, token=secrets.token_hex(8), leftovers=[], listener_port=0)
        try:
            self.wire.initialize()
            self.server_side()
            self.wait_for_go()
            self.probes()
        except (_Stop, WireError) as exc:
            self.obs["stopped"] = str(exc)
        except Exception as exc:
            # A bug here must still end in a report (every property it left unproven FAILED),
            # not in a thread that died while the server waits for input forever.
            self.obs["stopped"] = f"the self-test failed: {exc!r}"
        finally:
            try:
                if "server" in self.obs:
                    self.secret_scan(tee)
            finally:
                os.close(self.wire.to_server)  # end of input: the server shuts down


def _accepted(listener: socket.socket) -> int:
    hits = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            conn, _ = listener.accept()
            conn.close()
            hits += 1
    return hits


def main(argv: list[str]) -> int:
    facts = json.loads(argv[0])
    real_out, real_err = os.dup(1), os.dup(2)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd, target in ((in_r, 0), (out_w, 1), (err_w, 2)):
        os.dup2(fd, target)
        os.close(fd)
    tee = Tee(err_r, real_err, facts)
    tee.start()
    driver = Driver(facts, Wire(in_w, out_r), real_err)
    thread = threading.Thread(target=driver.drive, args=(tee,), name="selftest-driver", daemon=True)
    thread.start()
    from skill_mcp.cli import main as serve  # the production server, in this process

    with contextlib.suppress(SystemExit):
        serve(["serve"])
    for target in (1, 2):
        os.dup2(real_err, target)  # the server is done: nothing more reaches the pipes
    thread.join(timeout=30)
    if tee.thread is not None:
        tee.thread.join(timeout=5)
    if "server" not in driver.obs:
        driver.obs.setdefault("stopped", "the server never answered initialize")
        driver.obs["server"] = {}
    found = verdicts.judge(driver.obs)
    text = (
        (
            json.dumps({"properties": [v.to_dict() for v in found], "exitCode": verdicts.exit_code(found)}, indent=2)
            + "\n"
        )
        if facts.get("json")
        else verdicts.render(found)
    )
    os.write(real_out, text.encode())
    return verdicts.exit_code(found)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
