"""Measure the appliance figures reported in docs/deploy.md (run after `make image`).

    python container/measure.py [IMAGE]

Prints: image size; time from `docker run` to the `initialize` result (median of 5);
skill_run of a trivial script through the server (confirmed call, median of 20) against
`docker exec` of the same script in the same container, as a ratio. Ratios are what to
compare across machines; absolute numbers depend on the box.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
SKILLS = REPO / "tests" / "appliance" / "skills"
FLAGS = ["--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL",
         "--cap-add", "NET_ADMIN", "--cap-add", "SETPCAP", "--security-opt", "no-new-privileges", "--read-only",
         "--tmpfs", "/run", "--tmpfs", "/tmp", "-v", f"{SKILLS}:/skills:ro"]  # noqa: S108 - tmpfs mount points inside the container
GRANT = json.dumps([{"skill": "probe", "script": "scripts/probe.py"}])
CALL = {"skill": "probe", "script": "scripts/probe.py", "args": ["exists", "/"]}


def params(image: str, name: str) -> StdioServerParameters:
    return StdioServerParameters(command="docker", args=[
        "run", "-i", "--rm", "--name", name, *FLAGS, "-e", f"MCP_SKILL_RUN={GRANT}",
        "-e", "MCP_CONFIRM_ELICITATION=off", "-e", "SKILL_MCP_LOG=warning", image])


async def startup(image: str) -> float:
    started = time.perf_counter()
    async with Client(params(image, f"skill-mcp-measure-{time.monotonic_ns()}"), mode="legacy",
                      read_timeout_seconds=60):
        return time.perf_counter() - started


async def overhead(image: str, runs: int) -> tuple[float, float]:
    name = f"skill-mcp-measure-{time.monotonic_ns()}"
    async with Client(params(image, name), mode="legacy", read_timeout_seconds=60) as client:
        via_server, via_exec = [], []
        for _ in range(runs):
            first = await client.call_tool("skill_run", CALL)
            token = (first.structured_content or {})["confirmToken"]
            t0 = time.perf_counter()
            done = await client.call_tool("skill_run", {**CALL, "confirmToken": token})
            via_server.append(time.perf_counter() - t0)
            assert (done.structured_content or {}).get("status") == "ok", done
            t0 = time.perf_counter()
            subprocess.run(["docker", "exec", "-u", "10002", "-w", "/skills/probe", name, "/usr/bin/python3.11",
                            "/skills/probe/scripts/probe.py", "exists", "/"], check=True, capture_output=True)
            via_exec.append(time.perf_counter() - t0)
        return statistics.median(via_server), statistics.median(via_exec)


def main() -> None:
    image = sys.argv[1] if len(sys.argv) > 1 else "skill-mcp:dev"
    size = int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", image], capture_output=True,
                              check=True, text=True).stdout)
    starts = [anyio.run(startup, image) for _ in range(5)]
    server_s, exec_s = anyio.run(overhead, image, 20)
    print(json.dumps({
        "image": image, "imageSizeMB": round(size / 1e6, 1),
        "dockerRunToInitializeS": round(statistics.median(starts), 3),
        "skillRunMedianMs": round(server_s * 1000, 1), "dockerExecMedianMs": round(exec_s * 1000, 1),
        "skillRunOverDockerExec": round(server_s / exec_s, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
