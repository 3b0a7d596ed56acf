"""Claims a skill makes about the server's behaviour, replayed against the real server.

`test-malformed-input` hands users a probe file and says what each line gets back; the probe
is taken from the skill itself and sent to `skill-mcp serve`, and each stated answer checked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skill_mcp.config import BUNDLED_ROOT
from tests.pack.extract import code_blocks, split_skill_md
from tests.serve import SKILL_MCP

pytestmark = pytest.mark.slow  # every case starts a server or a CLI subprocess

SERVER = Path(SKILL_MCP)


def _probe_lines() -> list[str]:
    _, body = split_skill_md((BUNDLED_ROOT / "test-malformed-input" / "SKILL.md").read_text(encoding="utf-8"))
    lang, text = next(iter(code_blocks(body)))
    assert lang == ""
    return [line for line in text.splitlines() if line.strip()]


def _exchange(lines: list[str], timeout: float = 60) -> dict[Any, dict[str, Any]]:
    """Pipe ``lines`` in and close stdin, exactly as the skill says (`serve < probe.jsonl`):
    the server must answer everything it read before the end of input, then exit 0."""
    done = subprocess.run(
        [str(SERVER), "serve"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={"SKILL_MCP_LOG": "warning", "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, done.stderr[-1000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # every stdout line must be JSON
    return {msg.get("id"): msg for msg in answers}


def test_the_malformed_input_probe_gets_the_answers_the_skill_promises() -> None:
    lines = _probe_lines()
    assert "this is not json" in lines
    got = _exchange(lines)
    assert set(got) == {None, 1, 2, 3, 4, 5, 6}
    assert "result" in got[1]
    assert got[None]["error"]["code"] == -32700
    assert got[2]["error"]["code"] == -32601
    assert got[3]["result"]["isError"] is True
    assert got[3]["result"]["structuredContent"]["reason"] == "invalid-arguments"
    assert got[4]["error"]["code"] == -32602 and got[4]["error"]["data"]["reason"] == "unknown-uri"
    assert got[5]["result"] == {}
    assert got[6]["error"]["code"] == -32602 and got[6]["error"]["data"]["reason"] == "unknown-tool"


RUNNABLE = {"tools", "index", "list", "search", "show", "call"}


def _cli(argv: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SKILL_MCP_LOG": "warning"}
    return subprocess.run(
        [str(SERVER), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def _self_contained_commands() -> list[tuple[str, ...]]:
    """Read-only pack commands that need nothing but the bundled pack (no user paths)."""
    from tests.pack.extract import commands, skill_dirs

    names = {d.name for d in skill_dirs()}
    out: list[tuple[str, ...]] = []
    for d in skill_dirs():
        for c in commands(d):
            argv = c.argv
            if not argv or argv[0] not in RUNNABLE or argv in out:
                continue
            if any(a.startswith(("/", "~", ".")) or ("/" in a and not a.startswith("{")) for a in argv[1:]):
                continue  # names a path on the reader's machine
            if argv[0] == "show" and argv[1] not in names:
                continue  # a placeholder such as my-skill
            if any(re.fullmatch(r"[A-Z][A-Z_]+", a) or '"NAME"' in a for a in argv[1:]):
                continue  # a placeholder such as NAME or ROOT
            out.append(argv)
    return out


@pytest.mark.timeout(600)  # about twenty CLI runs, one after another
def test_the_packs_own_read_only_commands_run_against_the_bundled_pack() -> None:
    argvs = _self_contained_commands()
    assert {a[0] for a in argvs} == RUNNABLE and len(argvs) >= 12
    failed = [(" ".join(a), r.returncode, r.stderr[-300:]) for a in argvs if (r := _cli(a)).returncode != 0]
    assert failed == []


def test_list_phase_returns_exactly_the_skills_of_that_phase() -> None:
    from tests.pack.extract import skill_dirs

    for phase in ("govern", "deploy"):
        done = _cli(("list", "--phase", phase, "--json"))
        assert done.returncode == 0, done.stderr
        listed = sorted(s["name"] for s in json.loads(done.stdout)["skills"])
        expected = sorted(
            d.name for d in skill_dirs() if f"  phase: {phase}\n" in (d / "SKILL.md").read_text(encoding="utf-8")
        )
        assert listed == expected and len(listed) >= 6


@pytest.mark.timeout(300)
@pytest.mark.parametrize("skill", ["connect-python-sdk-client", "test-both-protocol-eras"])
def test_the_python_client_examples_in_the_pack_run_against_the_real_server(skill: str) -> None:
    """The SDK snippets are pasted by users as they are; run them, pointing at this install."""
    _, body = split_skill_md((BUNDLED_ROOT / skill / "SKILL.md").read_text(encoding="utf-8"))
    blocks = [text for lang, text in code_blocks(body) if lang == "python"]
    assert len(blocks) == 1
    code = blocks[0].replace('command="skill-mcp"', f"command={str(SERVER)!r}")
    code = code.replace(', "--skills-dir", "./skills"', "")  # serve the bundled pack
    assert str(SERVER) in code
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "skill_search" in done.stdout


def test_narrowing_does_what_choose_tools_and_make_read_only_say() -> None:
    """`MCP_ENABLED_TOOLS` keeps only the named tools and stops advertising prompts,
    resources and the Skills extension (choose-tools-prompts-or-resources, make-server-read-only)."""

    def tools(extra: dict[str, str]) -> dict[str, Any]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SKILL_MCP_LOG": "warning", **extra}
        done = subprocess.run(
            [str(SERVER), "tools", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    full = tools({})
    assert "io.modelcontextprotocol/skills" in full["capabilities"]["extensions"] and full["prompts"] == 51
    read_only = tools({"MCP_ENABLED_TOOLS": "skill_list,skill_search,skill_load,skill_file"})
    assert sorted(t["name"] for t in read_only["tools"]) == ["skill_file", "skill_list", "skill_load", "skill_search"]
    assert "extensions" not in read_only["capabilities"] and "prompts" not in read_only["capabilities"]
    assert read_only["prompts"] == 0 and read_only["resources"] == 0


@pytest.mark.parametrize(
    ("env", "grant_from"),
    [
        ({"MCP_SKILL_RUN": "[]"}, "MCP_SKILL_RUN"),  # make-server-read-only, step 2
        ({"MCP_DATA_DIR": "/tmp"}, "hosted-default"),  # grant-scripts-with-mcp-skill-run: the hosted default
        ({}, "declaration"),  # standalone: the declaration stands (positive control)
    ],
)
def test_grant_defaults_the_pack_describes(env: dict[str, str], grant_from: str) -> None:
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SKILL_MCP_LOG": "warning"}
    done = subprocess.run(
        [str(SERVER), "call", "skill_list", "--args", '{"limit": 200}'],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**base, **env},
    )
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    states = {s["state"] for skill in listing["skills"] for s in skill["scripts"]}
    assert listing["grantFrom"] == grant_from
    assert states == ({"runnable"} if grant_from == "declaration" else {"not-granted"})
