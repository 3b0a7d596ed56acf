"""The three declared scripts do real work: run directly under the fence's environment, and
through the real server's skill_run (confirmation token round trip) in both protocol eras."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client, StdioServerParameters

from skill_mcp.config import BUNDLED_ROOT
from skill_mcp.runner.interpreters import resolve_interpreters
from tests.serve import SKILL_MCP

SERVER = Path(SKILL_MCP)
INTERPRETERS = resolve_interpreters()
CLIENTS = {"claude-desktop", "claude-code", "vscode", "cursor", "windsurf", "zed", "codex", "gemini", "goose"}

# A stand-in stdio server, passed to check_stdout.py as `python -c`: it answers like an MCP
# server, and with "noisy" also prints a debug line to stdout (the bug the check exists for).
FAKE_SERVER = """
import json, sys
noisy = sys.argv[1:] == ["noisy"]
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        print(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}), flush=True)
        continue
    if "id" not in msg:
        continue
    if noisy:
        print("debug: handling", msg["method"], flush=True)
    result = {"tools": [{"name": "fake_tool"}]} if msg["method"] == "tools/list" else {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def fenced_env(tmp: Path) -> dict[str, str]:
    """What the fence hands a script with nothing declared: the fixed allowlist only."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "TMPDIR": str(tmp),
    }


def run_direct(skill: str, argv: list[str], tmp: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=BUNDLED_ROOT / skill,
        env=fenced_env(tmp),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def python() -> str:
    return INTERPRETERS.path_for("python")


# --- check-stdout-purity (python) ---------------------------------------------------------


@pytest.mark.slow
def test_stdout_check_passes_the_real_skill_mcp_server(tmp_path: Path) -> None:
    out = run_direct("check-stdout-purity", [python(), "scripts/check_stdout.py", "--", str(SERVER), "serve"], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for check in ("stdout-lines", "initialize", "parse-error", "still-serving"):
        assert any(line.startswith("ok") and f" {check}:" in line for line in lines), out.stdout
    assert "skill_search" in out.stdout and lines[-1] == "PASS"


def test_stdout_check_fails_a_server_that_prints_debug_lines(tmp_path: Path) -> None:
    out = run_direct(
        "check-stdout-purity",
        [python(), "scripts/check_stdout.py", "--", python(), "-c", FAKE_SERVER, "noisy"],
        tmp_path,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "stray stdout: 'debug: handling tools/list'" in out.stdout
    assert out.stdout.splitlines()[-1] == "FAIL"


def test_stdout_check_reports_a_command_it_cannot_start(tmp_path: Path) -> None:
    out = run_direct(
        "check-stdout-purity", [python(), "scripts/check_stdout.py", "--", str(tmp_path / "absent")], tmp_path
    )
    assert out.returncode == 2


# --- print-client-config (node) ------------------------------------------------------------


def _parse_snippet(fmt: str, text: str) -> Any:
    if fmt == "json":
        return json.loads(text)
    if fmt == "toml":
        return tomllib.loads(text)
    if fmt == "yaml":
        return yaml.safe_load(text)
    assert fmt == "shell"
    return text


@pytest.mark.skipif("node" not in INTERPRETERS.paths, reason="node is not installed on this machine")
def test_client_config_script_prints_a_parseable_snippet_for_every_client(tmp_path: Path) -> None:
    command = "/opt/tools/bin/skill-mcp"
    out = run_direct(
        "print-client-config",
        [
            INTERPRETERS.path_for("node"),
            "scripts/print_config.js",
            "--json",
            "--command",
            command,
            "--skills-dir",
            "/srv/skills",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["command"] == command and report["args"] == ["serve", "--skills-dir", "/srv/skills"]
    assert set(report["clients"]) == CLIENTS
    for client, info in report["clients"].items():
        if info.get("text") is None:  # Claude Desktop has no Linux build
            assert client == "claude-desktop" and sys.platform.startswith("linux")
            continue
        parsed = _parse_snippet(info["format"], info["text"])
        assert command in json.dumps(parsed) and "/srv/skills" in json.dumps(parsed), client
    assert report["clients"]["cursor"]["file"] == str(tmp_path / ".cursor" / "mcp.json")
    # Under the fence HOME is TMPDIR here: the script says the locations need --home.
    assert any("--home" in note for note in report["notes"])


@pytest.mark.skipif("node" not in INTERPRETERS.paths, reason="node is not installed on this machine")
def test_client_config_script_refuses_an_unknown_client(tmp_path: Path) -> None:
    out = run_direct(
        "print-client-config",
        [INTERPRETERS.path_for("node"), "scripts/print_config.js", "--client", "no-such-client"],
        tmp_path,
    )
    assert out.returncode == 2 and "unknown client" in out.stderr


# --- validate-skills-directory (python: skill-mcp's own validator) --------------------------

CHECK = "scripts/check_skills.py"


def test_skills_check_finds_the_bundled_pack_clean(tmp_path: Path) -> None:
    out = run_direct("validate-skills-directory", [python(), CHECK], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok: 51 skills served, 0 errors, 0 warnings (strict floors applied)" in out.stdout


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _broken_tree(root: Path) -> Path:
    ok = "Does one useful thing well. Use when that thing is needed."
    _write(root / "good" / "SKILL.md", f"---\nname: good\ndescription: {ok}\n---\n1. Do.\n")
    _write(root / "other-name" / "SKILL.md", f"---\nname: good\ndescription: {ok}\n---\n1. Do.\n")
    _write(root / "Bad_Name" / "SKILL.md", f"---\nname: Bad_Name\ndescription: {ok}\n---\n1. Do.\n")
    _write(root / "no-front" / "SKILL.md", "# just markdown\n")
    _write(root / "no-desc" / "SKILL.md", "---\nname: no-desc\n---\n1. Do.\n")
    _write(root / "vague" / "SKILL.md", "---\nname: vague\ndescription: |\n  Short.\n---\nProse only, no steps.\n")
    _write(
        root / "scripted" / "SKILL.md",
        f"---\nname: scripted\ndescription: {ok}\nmcp-host:\n"
        "  version: 1\n  run:\n    - script: scripts/gone.py\n      interpreter: python\n"
        "    - script: scripts/tool.rb\n      interpreter: ruby\n---\n1. Run.\n",
    )
    _write(root / "scripted" / "scripts" / "tool.rb", "puts 1\n")
    _write(root / "leaky" / "SKILL.md", f"---\nname: leaky\ndescription: {ok}\n---\n1. Use the key.\n")
    _write(root / "leaky" / "notes.txt", "AKI" + "A" + "Z7" * 8 + "\n")  # assembled: no literal key here
    _write(
        root / "long-body" / "SKILL.md",
        f"---\nname: long-body\ndescription: {ok}\n---\n" + "".join(f"{i}. step\n" for i in range(1, 520)),
    )
    # 1030 characters, 10 of them three bytes long: a count in bytes would say 1050.
    wide = (ok + " \u2014" * 10 + " x" * 600)[:1030]
    _write(root / "wide" / "SKILL.md", f'---\nname: wide\ndescription: "{wide}"\n---\n1. Do.\n')
    _write(
        root / "outward" / "SKILL.md", f"---\nname: outward\ndescription: {ok}\n---\n1. See [g](../good/SKILL.md).\n"
    )
    _write(root / "skills" / "nested" / "SKILL.md", f"---\nname: nested\ndescription: {ok}\n---\n- do\n")
    (root / "empty-dir").mkdir()
    return root


def _findings(problems: list[dict[str, Any]], root: Path) -> set[tuple[str, str]]:
    """(skill directory, reason) pairs from a JSON report."""
    out = set()
    for p in problems:
        rel = Path(p["path"]).resolve().relative_to(root.resolve()).parts
        out.add((rel[1] if rel[0] == "skills" and len(rel) > 1 else rel[0], p["reason"]))
    return out


@pytest.mark.slow
def test_skills_check_reports_each_broken_skill_by_reason(tmp_path: Path) -> None:
    root = _broken_tree(tmp_path / "skills-root")
    out = run_direct("validate-skills-directory", [python(), CHECK, "--json", str(root)], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert _findings(report["problems"], root) == {
        ("other-name", "name-mismatch"),
        ("Bad_Name", "invalid-name"),
        ("no-front", "frontmatter-parse"),
        ("no-desc", "frontmatter-invalid"),
        ("vague", "floor-description-short"),
        ("vague", "floor-description-when"),
        ("vague", "floor-no-steps"),
        ("scripted", "declared-script-missing"),
        ("scripted", "interpreter-unavailable"),
        ("leaky", "credential-like"),
        ("long-body", "floor-body-too-long"),
        ("empty-dir", "no-skill-md"),
        ("wide", "spec-warning"),
        ("outward", "floor-reference-outside-skill"),
        # Served by the tools, left out of the Skills extension: a conforming host refuses both.
        ("other-name", "extension-excluded"),
        ("wide", "extension-excluded"),
    }
    (wide,) = [p for p in report["problems"] if p["reason"] == "spec-warning"]
    assert "1030 characters" in wide["detail"]  # characters, not bytes
    assert report["skills"] == 9 and report["byReason"]["interpreter-unavailable"] == 1
    text = run_direct("validate-skills-directory", [python(), CHECK, str(root)], tmp_path)
    assert "FAILED: 9 skills served" in text.stdout and "  floor-no-steps" in text.stdout


@pytest.mark.slow
def test_skills_check_and_skill_mcp_validate_strict_give_one_report(tmp_path: Path) -> None:
    """One validator: the script's report and the command's are the same bytes, and so are their exits."""
    root = _broken_tree(tmp_path / "skills-root")
    script = run_direct("validate-skills-directory", [python(), CHECK, "--json", str(root)], tmp_path)
    authority = subprocess.run(
        [str(SERVER), "validate", "--strict", "--json", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=fenced_env(tmp_path),
    )
    assert (script.returncode, script.stdout) == (authority.returncode, authority.stdout)
    assert json.loads(script.stdout)["problems"]  # a non-trivial report


def test_skills_check_without_skill_mcp_to_import_says_so_and_exits_3(tmp_path: Path) -> None:
    # A copy of the skill outside the package, run without site-packages: no validator to import,
    # and no second, divergent one to fall back on.
    copy = Path(shutil.copytree(BUNDLED_ROOT / "validate-skills-directory", tmp_path / "alone"))
    out = subprocess.run(
        [python(), "-S", str(copy / CHECK), str(tmp_path)],
        env=fenced_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 3 and out.stdout == ""
    assert "skill-mcp validate --strict" in out.stderr


# --- through the real fence -----------------------------------------------------------------


def _run_cases() -> list[tuple[str, str, list[str], str, str]]:
    """(skill, script, args, status, text stdout or stderr must contain) for each declared script.

    validate-skills-directory imports the skill-mcp around its own directory; the run's sandbox
    lets a script read only its own skill, so under skill_run it says so and exits 3, naming the
    command to use instead (its direct runs above are the positive control)."""
    cases = [
        ("check-stdout-purity", "scripts/check_stdout.py", ["--", python(), "-c", FAKE_SERVER], "ok", "PASS"),
        ("validate-skills-directory", CHECK, [], "error", "skill-mcp validate --strict"),
        ("write-a-run-report", "scripts/report.py", ["apples=3"], "ok", "wrote report.md and table.csv"),
    ]
    if "node" in INTERPRETERS.paths:
        cases.append(
            (
                "print-client-config",
                "scripts/print_config.js",
                ["--client", "codex", "--command", "/usr/local/bin/skill-mcp"],
                "ok",
                "[mcp_servers.skills]",
            )
        )
    return cases


@pytest.fixture()
def readable_pack() -> Iterator[Path]:
    """A copy of the installed package every uid can read, serving its bundled pack. A server
    running as root (CI) drops scripts to an unprivileged user, who cannot enter a checkout under
    a 0700 home directory. The whole package is copied (with PyYAML beside it, as in a
    site-packages) because validate-skills-directory imports the skill-mcp that ships it."""
    base = Path(tempfile.mkdtemp(prefix="skill-mcp-pack-"))
    try:
        os.chmod(base, 0o755)
        skip = shutil.ignore_patterns("__pycache__")
        package = Path(shutil.copytree(BUNDLED_ROOT.parent, base / "site" / "skill_mcp", ignore=skip))
        shutil.copytree(Path(yaml.__file__).parent, base / "site" / "yaml", ignore=skip)
        for path in (base / "site").rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(base / "site", 0o755)
        yield package / "bundled"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_each_declared_script_runs_through_skill_run_after_confirmation(era: str, readable_pack: Path) -> None:
    params = StdioServerParameters(
        command=str(SERVER), args=["serve", "--skills-dir", str(readable_pack)], env={"SKILL_MCP_LOG": "warning"}
    )
    async with Client(params, mode=era, read_timeout_seconds=90) as client:
        listing = (await client.call_tool("skill_list", {"limit": 200})).structured_content
        assert listing["grantFrom"] == "declaration" and listing["total"] == 51
        for skill, script, args, status, expected in _run_cases():
            call = {"skill": skill, "script": script, "args": args}
            first = await client.call_tool("skill_run", call)
            preview = first.structured_content
            assert not first.is_error and preview["status"] == "confirmation-required", preview
            assert preview["preview"]["willRun"]["cwd"] == os.path.realpath(readable_pack / skill)
            done = await client.call_tool("skill_run", {**call, "confirmToken": preview["confirmToken"]})
            result = done.structured_content
            assert result["status"] == status, result
            assert expected in result["stdout"] + result["stderr"], result
            assert result["truncated"] == {"stdout": False, "stderr": False}
