"""Every command example in README.md and docs/*.md runs as written, or names the test that runs it.

Examples are read out of the documents on every run (fenced ``sh``/``bash``/``shell``/``console``
blocks, ``\\`` continuations joined), so a new example is picked up without touching this file.
Each one is, by the first rule that applies:

- a synopsis (``[--flag]``, ``DIR``, ``...``): the command line's grammar, not something to run;
  its subcommand must exist;
- mapped in ``ELSEWHERE`` to the test that runs it (a long-running server, Docker, the
  conformance suite, ``make``): that test must exist;
- ``skill-mcp``/``skillmcp`` ``serve`` on stdio: started as written and asked for its tools by
  the SDK's own client;
- loading shell completion (``COMPLETION``): bash's line runs in bash, which must then complete
  ``skill-mcp``; zsh's and fish's scripts are generated and checked by that shell's parser when
  it is installed;
- a set-up line (``SETUP``: making a token file): run as written by ``bash -c`` in a scratch
  ``HOME``; it must exit 0 and leave the file it names;
- any other ``skill-mcp``/``skillmcp`` line, or a pipeline into ``serve``: run as written by
  ``bash -c`` with this checkout's commands first on ``PATH``, in a scratch ``HOME`` whose
  ``~/skills`` holds two good skills; it must exit 0 and print something on stdout, nothing but
  JSON for a pipeline into ``serve``, and a trailing ``# -> NAME`` comment is a claim checked
  against the first line printed (the first hit).

The scratch ``HOME`` is fresh for every example: nothing but ``~/skills`` (no ``~/.config``, no
``~/.cache``), as on a new user's first day. Anything else fails, naming the line: add a rule or an ``ELSEWHERE`` entry with a real test.

Client configurations (one JSON object a line in ``json``/``jsonc`` blocks, ``mcpServers`` or
``servers``) are started the way a client starts them - command, args, env - with the
placeholder roots (``/path/to/skills``, ``/srv/packs``) pointed at a scratch skills directory
and ``python`` meaning this interpreter, and the SDK's client must list their tools.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"sh", "bash", "shell", "console"}
COMMANDS = {"skill-mcp", "skillmcp"}

# Examples another test runs, by a pattern of the command line -> "path::test" (which must exist).
ELSEWHERE: dict[str, str] = {
    r"^make run\b": "tests/test_make_run.py::test_make_run_writes_nothing_but_protocol_on_stdout",
    r"^make test\b": "tests/test_doc_examples.py::test_every_example_is_classified",  # the suite itself
    r"^make image\b": "tests/appliance/test_server.py::test_time_from_docker_run_to_initialize_is_bounded",
    r"^docker run ": "tests/appliance/test_server.py::test_time_from_docker_run_to_initialize_is_bounded",
    # No Fly account here: the command the Fly machine runs (`selftest --not-claimed ...`) is what
    # this test checks; the docker line of the same self-test runs in test_selftest.py.
    r"^fly machine run .* selftest ": (
        "tests/appliance/test_selftest_verdicts.py::test_a_property_not_claimed_is_reported_as_such"
    ),
    r"^skill-mcp serve --http .* --allowed-host ": (
        "tests/http/test_http_auth.py::test_allowed_host_admits_the_proxy_name_and_nothing_else"
    ),
    r"^skill-mcp serve --http .* --token-file ": "tests/http/test_http_auth.py::test_token_file_is_the_token",
    r"^bash \.ci/setup\.d/node\.sh": "tests/conformance/test_conformance.py::test_conformance_suite_passes_against_its_baseline",
    # Fly's CLI cannot run here; the image's selftest it starts runs under Docker with the documented flags.
    r"^pytest tests/conformance": "tests/conformance/test_conformance.py::test_conformance_suite_passes_against_its_baseline",
    r"^pytest tests/verifiers": "tests/verifiers/test_verifiers.py::test_inspector_verify_passes_over_stdio",
}
# Set-up lines run as written; the group is the file they must leave behind.
SETUP = re.compile(r"^umask 077; (?:mkdir -p \S+; )?openssl rand -hex 32 > (\S+)$")
# Loading shell completion: bash's line runs in bash, which must then complete the command; zsh's
# and fish's scripts are generated and, where that shell is installed, checked by its parser.
COMPLETION = re.compile(r'^(?:eval "\$\()?(skill-mcp|skillmcp) completion (bash|zsh|fish)\b')
SYNOPSIS = re.compile(r"\[|\.\.\.|\b(DIR|HOST:PORT|PATH|NAME|ROOT|TOOL|QUERY|JSON)\b")
GOOD = (
    "---\nname: {name}\ndescription: {name} turns notes into reports. Use when a report is needed.\n"
    "---\n# {name}\n\n## Steps\n\n1. Read `references/guide.md`.\n2. Write the report.\n"
)


@dataclass(frozen=True)
class Example:
    where: str
    line: str

    @property
    def words(self) -> list[str]:
        words = shlex.split(self.line, comments=True)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            words = words[1:]  # VAR=value prefixes
        return words


def examples() -> list[Example]:
    found: list[Example] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"^```([\w-]*)\n(.*?)^```", text, re.S | re.M):
            if block.group(1) not in SHELL_LANGS:
                continue
            start = text.count("\n", 0, block.start(2)) + 1
            body = block.group(2).replace("\\\n", " ")
            for offset, raw in enumerate(body.splitlines()):
                line = raw.strip()
                if line and not line.startswith("#"):
                    found.append(Example(f"{doc.relative_to(REPO)}:{start + offset}", line))
    return found


def classify(example: Example) -> str:
    for pattern, test in ELSEWHERE.items():
        if re.search(pattern, example.line):
            return f"elsewhere {test}"
    if SETUP.match(example.line):
        return "setup"
    if COMPLETION.match(example.line):
        return "completion"
    words = example.words
    if not words:
        return "unknown"
    if words[0] in COMMANDS and SYNOPSIS.search(shlex.join(words)):
        return "synopsis"
    if words[0] in COMMANDS and words[1:2] == ["serve"]:
        return "serve"
    if words[0] in COMMANDS or re.search(r"\|\s*(skill-mcp|skillmcp) serve\s*$", example.line):
        return "run"
    return "unknown"


ALL = examples()
IDS = [e.where for e in ALL]


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for name in ("alpha", "beta"):
        skill = home / "skills" / name
        (skill / "references").mkdir(parents=True)
        (skill / "SKILL.md").write_text(GOOD.format(name=name), encoding="utf-8")
        (skill / "references" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    return home


def _env(home: Path) -> dict[str, str]:
    return {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SKILL_MCP_LOG": "warning",
    }


def test_every_example_is_classified() -> None:
    unknown = [f"{e.where}: {e.line}" for e in ALL if classify(e) == "unknown"]
    assert unknown == [], "examples nobody runs; add a rule or an ELSEWHERE entry naming the test that runs them"
    assert len(ALL) >= 30


@pytest.mark.parametrize("test", sorted(set(ELSEWHERE.values())))
def test_every_named_test_exists(test: str) -> None:
    path, _, name = test.partition("::")
    source = (REPO / path).read_text(encoding="utf-8")
    assert re.search(rf"^(async )?def {re.escape(name)}\(", source, re.M), f"{test} does not exist"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", ALL, ids=IDS)
def test_the_example_runs_as_written(example: Example, tmp_path: Path) -> None:
    kind = classify(example)
    if kind == "synopsis":
        from skill_mcp.cli.main import COMMANDS as SUBCOMMANDS

        assert example.words[1] in SUBCOMMANDS
    elif kind == "serve":
        _serve_answers(example, _home(tmp_path))
    elif kind == "completion":
        home = _home(tmp_path)
        shell = COMPLETION.match(example.line).group(2)  # type: ignore[union-attr]
        if shell == "bash":
            line = f"set -e\n{example.line}\ncomplete -p skill-mcp"
        else:
            line = f"skill-mcp completion {shell} > script" + (
                f" && {shell} -n script" if shutil.which(shell) else " && test -s script"
            )
        done = subprocess.run(
            ["bash", "-c", line],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=home,
            env=_env(home),
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{example.where}: {done.stderr[-2000:]}"
        assert shell != "bash" or "_skill_mcp" in done.stdout
    elif kind == "setup":
        home = _home(tmp_path)
        done = subprocess.run(
            ["bash", "-c", example.line],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=home,
            env=_env(home),
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{example.where}: {example.line}\n{done.stderr[-2000:]}"
        made = SETUP.match(example.line).group(1)  # type: ignore[union-attr]
        target = Path(made.replace("~", str(home), 1)) if made.startswith("~") else home / made
        assert target.is_file() and len(target.read_text().strip()) == 64, f"{example.where}: no token in {made}"
    elif kind == "run":
        home = _home(tmp_path)
        done = subprocess.run(
            ["bash", "-c", example.line],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            cwd=home,
            env=_env(home),
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{example.where}: {example.line}\n{done.stderr[-2000:]}"
        # Exit 0 alone would pass a list that printed nothing or a search that found another skill.
        assert done.stdout.strip(), f"{example.where}: printed nothing on stdout"
        claimed = re.search(r"#\s*->\s*(\S+)\s*$", example.line)
        if claimed:  # "skill-mcp search ...  # -> connect-cursor": the first hit is that skill
            first = done.stdout.strip().splitlines()[0]
            assert re.search(rf"\b{re.escape(claimed.group(1))}\b", first), f"{example.where}: first line {first!r}"
        if re.search(r"\|\s*(skill-mcp|skillmcp) serve", example.line):
            assert all("error" not in json.loads(line) for line in done.stdout.splitlines())
            assert done.stdout.strip(), "the server answered nothing"
    else:
        assert kind.startswith("elsewhere ") or kind == "unknown"
        assert kind != "unknown", f"{example.where}: nothing runs {example.line!r}"


def _serve_answers(example: Example, home: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    words = example.words
    params = StdioServerParameters(command=str(BIN / words[0]), args=words[1:], env=_env(home), cwd=str(home))

    async def ask() -> set[str]:
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert "skill_list" in anyio.run(ask)


PLACEHOLDER_ROOTS = ("/path/to/skills", "/srv/packs")


def client_configs() -> list[tuple[str, dict[str, object]]]:
    found: list[tuple[str, dict[str, object]]] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"^```(jsonc?)\n(.*?)^```", text, re.S | re.M):
            start = text.count("\n", 0, block.start(2)) + 1
            for offset, raw in enumerate(block.group(2).splitlines()):
                line = raw.strip()
                if not line.startswith("{") or '"command"' not in line:
                    continue  # a shape example, not a configuration
                servers = json.loads(line)
                for entry in (servers.get("mcpServers") or servers.get("servers") or {}).values():
                    if "command" in entry:
                        found.append((f"{doc.relative_to(REPO)}:{start + offset}", entry))
    return found


CONFIGS = client_configs()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", [c[1] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
async def test_the_client_configuration_starts_a_server(entry: dict[str, object], tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    home = _home(tmp_path)
    skills = str(home / "skills")

    def real(value: str) -> str:
        return skills if value in PLACEHOLDER_ROOTS else value

    command = str(entry["command"])
    command = sys.executable if command == "python" else str(BIN / command) if command in COMMANDS else command
    args = [real(str(a)) for a in entry.get("args", [])]  # type: ignore[attr-defined]
    env = {**_env(home), **{k: real(str(v)) for k, v in dict(entry.get("env", {})).items()}}  # type: ignore[call-overload]
    async with Client(
        StdioServerParameters(command=command, args=args, env=env, cwd=str(home)),
        mode="legacy",
        read_timeout_seconds=60,
    ) as client:
        listing = (await client.call_tool("skill_list", {})).structured_content or {}
    assert {s["name"] for s in listing["skills"]} == {"alpha", "beta"}


def test_the_readme_has_client_configurations() -> None:
    assert len([c for c in CONFIGS if c[0].startswith("README.md")]) >= 4


def test_the_rules_hold_on_known_lines() -> None:
    assert classify(Example("x", "skill-mcp serve [--skills-dir DIR]... [--watch]")) == "synopsis"
    assert classify(Example("x", "skill-mcp serve --watch")) == "serve"
    assert classify(Example("x", "SKILL_MCP_COMPAT=skillmcp skillmcp call search_skills")) == "run"
    assert classify(Example("x", "curl http://example.com")) == "unknown"
    assert (
        classify(Example("x", "umask 077; mkdir -p ~/.config/x; openssl rand -hex 32 > ~/.config/x/token")) == "setup"
    )
    assert os.path.basename(BIN / "skillmcp") == "skillmcp"
