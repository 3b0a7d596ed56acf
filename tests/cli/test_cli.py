"""Every subcommand through a real subprocess: exit codes, --json shapes, errors on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import as_json, run, tree, write

SUBCOMMANDS = ["serve", "tools", "index", "list", "search", "show", "call", "validate", "pack", "pack lock"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tree(tmp_path / "skills")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command: str) -> None:
    done = run(*command.split(), "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: skill-mcp")


def test_no_subcommand_and_unknown_flags_are_usage_errors_on_stderr() -> None:
    assert run().returncode == 2
    done = run("list", "--no-such-flag")
    assert done.returncode == 2 and done.stdout == "" and "usage" in done.stderr


def test_index_json_lists_skills_packs_and_problems(root: Path) -> None:
    done = run("index", "--json", "--skills-dir", str(root))
    assert done.returncode == 0, done.stderr
    data = as_json(done)
    assert set(data) == {"roots", "rootsFrom", "packs", "skills", "problems"}
    assert [s["name"] for s in data["skills"]] == ["alpha", "beta"]
    assert {"name", "description", "uri", "path", "files"} <= set(data["skills"][0])
    assert any(p["reason"] == "frontmatter-parse" and p["level"] == "error" for p in data["problems"])
    assert run("index", "--skills-dir", str(root)).stdout.startswith("roots (--skills-dir)")


def test_list_filters_by_phase(root: Path) -> None:
    data = as_json(run("list", "--json", "--phase", "verify", "--skills-dir", str(root)))
    assert [s["name"] for s in data["skills"]] == ["beta"] and data["count"] == 1
    text = run("list", "--skills-dir", str(root))
    assert text.returncode == 0 and [line.split()[0] for line in text.stdout.splitlines()] == ["alpha", "beta"]


def test_list_reads_skills_dir_from_the_environment(root: Path) -> None:
    data = as_json(run("list", "--json", env={"SKILLS_DIR": str(root)}))
    assert [s["name"] for s in data["skills"]] == ["alpha", "beta"]


def test_search_exit_codes_and_json_shape(root: Path) -> None:
    done = run("search", "turn", "notes", "into", "a", "report", "--json", "--skills-dir", str(root))
    assert done.returncode == 0
    data = as_json(done)
    assert set(data) == {"query", "hits", "count", "searched", "match", "coverage"}
    assert data["coverage"] == "complete"  # the CLI indexes every body before it answers
    assert {"name", "description", "uri", "score", "reason", "matched", "fields"} <= set(data["hits"][0])
    nothing = run("search", "zzzqqq", "--skills-dir", str(root))
    assert nothing.returncode == 1 and nothing.stdout == "" and "no skill matches" in nothing.stderr
    assert run("search", "x", "--limit", "51", "--skills-dir", str(root)).returncode == 2


def test_show_prints_instructions_and_a_manifest_with_digests(root: Path) -> None:
    data = as_json(run("show", "alpha", "--json", "--skills-dir", str(root)))
    assert data["name"] == "alpha" and "## Steps" in data["instructions"]
    assert {f["path"] for f in data["manifest"]} == {"SKILL.md", "references/guide.md"}
    assert all(f["digest"].startswith("sha256:") for f in data["manifest"])
    text = run("show", "alpha", "--skills-dir", str(root))
    assert text.returncode == 0 and "references/guide.md" in text.stdout


def test_show_of_an_unknown_or_refused_skill_fails_on_stderr(root: Path) -> None:
    done = run("show", "broken", "--skills-dir", str(root))
    assert done.returncode == 1 and done.stdout == "" and "frontmatter-parse" in done.stderr
    as_json_err = run("show", "nope", "--json", "--skills-dir", str(root))
    assert as_json_err.returncode == 1 and '"reason": "unknown-skill"' in as_json_err.stderr


@pytest.mark.slow
def test_tools_prints_what_the_server_advertises(root: Path) -> None:
    data = as_json(run("tools", "--json", "--skills-dir", str(root)))
    names = {t["name"] for t in data["tools"]}
    assert {"skill_list", "skill_load", "skill_file", "skill_search"} <= names
    assert "io.modelcontextprotocol/skills" in data["capabilities"]["extensions"]
    assert data["prompts"] == 2 and data["server"]["name"]
    assert "skill_search" in run("tools", "--skills-dir", str(root)).stdout


@pytest.mark.slow
def test_call_goes_through_the_server_and_returns_structured_content(root: Path) -> None:
    done = run("call", "skill_load", "--args", '{"name": "alpha"}', "--json", "--skills-dir", str(root))
    assert done.returncode == 0, done.stderr
    data = as_json(done)
    assert data["isError"] is False and data["structuredContent"]["name"] == "alpha"
    listed = as_json(run("call", "skill_list", "--json", "--skills-dir", str(root)))
    assert any(p["reason"] == "frontmatter-parse" for p in listed["structuredContent"]["problems"])


@pytest.mark.slow
def test_call_exit_codes_for_tool_errors_protocol_errors_and_bad_args(root: Path) -> None:
    refused = run("call", "skill_load", "--args", '{"name": "nope"}', "--json", "--skills-dir", str(root))
    assert refused.returncode == 1 and as_json(refused)["structuredContent"]["reason"] == "unknown-skill"
    invalid = run("call", "skill_search", "--args", '{"query": "x", "limit": 99}', "--skills-dir", str(root))
    assert invalid.returncode == 1 and "invalid-arguments" in invalid.stdout
    unknown = run("call", "no_such_tool", "--skills-dir", str(root))
    assert unknown.returncode == 1 and "no_such_tool" in unknown.stderr
    assert run("call", "skill_list", "--args", "[1]").returncode == 2
    assert run("call", "skill_list", "--args", "{not json").returncode == 2


def test_validate_exit_codes_and_json(root: Path, tmp_path: Path) -> None:
    bad = run("validate", "--json", str(root))
    assert bad.returncode == 1
    data = as_json(bad)
    assert data["ok"] is False and data["errors"] >= 1 and data["skills"] == 2
    assert {"path", "reason", "detail", "level"} <= set(data["problems"][0])
    clean = tmp_path / "clean"
    write(clean / "alpha" / "SKILL.md", (root / "alpha" / "SKILL.md").read_text(encoding="utf-8"))
    write(clean / "alpha" / "references" / "guide.md", "# Guide\n")
    done = run("validate", str(clean))
    assert done.returncode == 0 and done.stdout.startswith("ok:")
    assert run("validate", "--strict", str(clean)).returncode == 0


def test_validate_collects_every_problem_across_roots(tmp_path: Path) -> None:
    one, two = tree(tmp_path / "one"), tmp_path / "two"
    write(two / "gamma" / "SKILL.md", "---\nname: gamma\n---\nno description\n")
    data = as_json(run("validate", "--json", str(one), str(two), str(tmp_path / "missing")))
    reasons = {p["reason"] for p in data["problems"]}
    assert {"frontmatter-parse", "frontmatter-invalid", "root-missing"} <= reasons


@pytest.mark.slow
def test_serve_answers_a_client_and_exits_0_when_stdin_closes(root: Path) -> None:
    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    )
    done = run("serve", "--skills-dir", str(root), stdin=init)
    assert done.returncode == 0
    assert '"id":1' in done.stdout.replace(" ", "") and "serverInfo" in done.stdout


def test_serve_with_a_bad_http_address_is_a_usage_error() -> None:
    done = run("serve", "--http", "not-an-address")
    assert done.returncode in (2, 3) and done.stdout == "" and done.stderr


def test_search_output_is_identical_across_processes_and_hash_seeds() -> None:
    corpus = str(Path(__file__).resolve().parent.parent / "search" / "corpus")
    args = ("search", "make", "slides", "and", "a", "pdf", "form", "--json", "--limit", "18", "--skills-dir", corpus)
    one = run(*args, env={"PYTHONHASHSEED": "1"})
    two = run(*args, env={"PYTHONHASHSEED": "2"})
    assert one.returncode == 0 and one.stdout == two.stdout
    assert len(as_json(one)["hits"]) > 3
