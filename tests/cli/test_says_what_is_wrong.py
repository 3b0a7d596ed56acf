"""The CLI names what is wrong, once, where a person looks: the reason that refused a skill,
a root that is not a directory, and levels that mean what docs/reasons.md says they mean."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import GOOD, as_json, run, write

LONG = "Turns notes into reports. Use when a report is needed. " + "More words. " * 90  # over 1024


def _duplicate_with_a_warning(tmp_path: Path) -> tuple[Path, Path]:
    """Two roots claim 'dup'; the first copy also has a description over the Agent Skills specification's 1024."""
    first, second = tmp_path / "one", tmp_path / "two"
    write(first / "dup" / "SKILL.md", f"---\nname: dup\ndescription: {LONG}\n---\n1. Do.\n")
    write(second / "dup" / "SKILL.md", GOOD.format(name="dup", phase="wire"))
    return first, second


def test_show_of_a_duplicate_name_gives_duplicate_name_not_the_warning_beside_it(tmp_path: Path) -> None:
    first, second = _duplicate_with_a_warning(tmp_path)
    roots = ["--skills-dir", str(first), "--skills-dir", str(second)]
    index = as_json(run("index", "--json", *roots))
    assert {p["reason"] for p in index["problems"]} >= {"spec-warning", "duplicate-name"}  # both present
    done = run("show", "dup", "--json", *roots)
    assert done.returncode == 1 and done.stdout == ""
    assert json.loads(done.stderr)["reason"] == "duplicate-name"
    text = run("show", "dup", *roots)
    assert "duplicate-name" in text.stderr and "spec-warning" not in text.stderr
    assert text.stderr.count("claim the name") == 1  # two refused directories, one sentence


def test_show_of_a_served_skill_with_a_warning_still_shows_it(tmp_path: Path) -> None:
    first, _ = _duplicate_with_a_warning(tmp_path)
    done = run("show", "dup", "--json", "--skills-dir", str(first))
    assert done.returncode == 0 and as_json(done)["name"] == "dup"


def test_list_of_a_mistyped_root_names_it_and_exits_3(tmp_path: Path) -> None:
    typo = tmp_path / "no-such-dir"
    done = run("list", "--skills-dir", str(typo))
    assert done.returncode == 3 and done.stdout == ""
    assert str(typo) in done.stderr and "not a directory" in done.stderr
    assert "no skills" not in done.stderr  # the cause, not the symptom
    as_json_err = run("list", "--json", "--skills-dir", str(typo))
    assert as_json_err.returncode == 3 and as_json(as_json_err)["count"] == 0
    assert json.loads(as_json_err.stderr)["reason"] == "root-missing"


def test_list_with_one_good_and_one_missing_root_lists_the_good_and_names_the_missing(tmp_path: Path) -> None:
    good = tmp_path / "good"
    write(good / "alpha" / "SKILL.md", GOOD.format(name="alpha", phase="wire"))
    done = run("list", "--skills-dir", str(good), "--skills-dir", str(tmp_path / "typo"))
    assert done.returncode == 3 and done.stdout.startswith("alpha")
    assert done.stderr.count("not a directory") == 1 and str(tmp_path / "typo") in done.stderr


def test_list_of_an_existing_empty_root_is_not_an_error(tmp_path: Path) -> None:
    done = run("list", "--skills-dir", str(tmp_path))
    assert done.returncode == 0 and done.stderr.count(f"no skill found under {tmp_path}") == 1


def _hidden_collection(tmp_path: Path) -> Path:
    """A collection laid out like openai/skills: every skill under a hidden folder."""
    root = tmp_path / "collection"
    write(root / "skills" / ".curated" / "alpha" / "SKILL.md", GOOD.format(name="alpha", phase="wire"))
    write(root / "README.md", "# A collection\n")
    return root


def test_list_search_and_index_of_a_root_that_serves_nothing_say_where_skills_are_looked_for(tmp_path: Path) -> None:
    root = _hidden_collection(tmp_path)
    for args in (("list",), ("search", "report"), ("index",)):
        done = run(*args, "--skills-dir", str(root))
        assert done.stderr.count(f"no skill found under {root}") == 1, (args, done.stderr)
        assert "hidden directories are not searched" in done.stderr and "no skills" not in done.stderr
    assert run("list", "--skills-dir", str(root)).returncode == 0
    assert run("search", "report", "--skills-dir", str(root)).returncode == 1  # found nothing, as before
    reached = run("list", "--skills-dir", str(root / "skills" / ".curated"))  # the way the hint names
    assert reached.returncode == 0 and reached.stdout.startswith("alpha") and reached.stderr == ""


def test_a_root_whose_only_skill_is_refused_names_the_refusal_not_an_empty_root(tmp_path: Path) -> None:
    write(tmp_path / "broken" / "SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    done = run("list", "--skills-dir", str(tmp_path))
    assert done.returncode == 0 and "no skill found" not in done.stderr
    index = run("index", "--skills-dir", str(tmp_path))
    assert "frontmatter-parse" in index.stdout and "no skill found" not in index.stderr


def test_a_phase_with_no_skill_says_so_about_the_phase(tmp_path: Path) -> None:
    write(tmp_path / "alpha" / "SKILL.md", GOOD.format(name="alpha", phase="wire"))
    done = run("list", "--phase", "govern", "--skills-dir", str(tmp_path))
    assert done.returncode == 0 and done.stderr == "no skills in phase 'govern'; the phases served: wire\n"


def test_show_and_search_under_a_missing_root_name_it(tmp_path: Path) -> None:
    typo = str(tmp_path / "typo")
    shown = run("show", "alpha", "--json", "--skills-dir", typo)
    said = [json.loads(line) for line in shown.stderr.splitlines()]
    assert shown.returncode == 3 and [s["reason"] for s in said] == ["root-missing", "root-missing"]
    assert said[0]["path"] == typo and said[1]["exit"] == 3  # named at start, then the error
    searched = run("search", "report", "--skills-dir", typo)
    assert searched.returncode == 3 and typo in searched.stderr


def test_a_name_mismatch_is_served_by_the_tools_and_fails_validate_for_the_extension(tmp_path: Path) -> None:
    write(
        tmp_path / "real-dir" / "SKILL.md", GOOD.format(name="other-name", phase="wire").replace("# other-name", "# x")
    )
    listed = as_json(run("list", "--json", "--skills-dir", str(tmp_path)))
    assert [s["name"] for s in listed["skills"]] == ["real-dir"]  # served under its directory name
    done = run("validate", "--json", str(tmp_path))
    # The tools serve it (a warning); the Skills extension cannot publish it (an error).
    assert done.returncode == 1, done.stdout
    found = {(p["reason"], p["level"], p.get("rule")) for p in as_json(done)["problems"]}
    assert found == {("name-mismatch", "warning", None), ("extension-excluded", "error", "name-mismatch")}


def test_validate_of_a_root_with_no_skill_passes_but_says_nothing_was_found(tmp_path: Path) -> None:
    write(tmp_path / "collection" / "skills" / ".curated" / "alpha" / "SKILL.md", GOOD.format(name="alpha", phase="w"))
    done = run("validate", str(tmp_path / "collection"))
    assert done.returncode == 0 and "0 skills served" in done.stdout
    # Said once among the problems (a warning: nothing is refused), and once on stderr at start.
    assert done.stdout.count("hidden directories are not searched") == 1
    assert done.stderr.count("hidden directories are not searched") == 1
    (problem,) = as_json(run("validate", "--json", str(tmp_path / "collection")))["problems"]
    assert (problem["reason"], problem["level"], problem["path"]) == (
        "root-empty",
        "warning",
        str(tmp_path / "collection"),
    )
    named = run("validate", str(tmp_path / "collection" / "skills" / ".curated"))  # the way to reach them
    assert named.returncode == 0 and "1 skills served" in named.stdout and named.stderr == ""


def test_show_of_a_name_from_the_skillmcp_notes_names_the_skill_that_serves_it() -> None:
    # The example written for the skillmcp name is `skillmcp show protocol-conformance-test`; the pack calls it run-conformance-suite.
    done = run("show", "protocol-conformance-test")
    assert done.returncode == 1 and done.stdout == ""
    assert "closest: run-conformance-suite," in done.stderr
    as_json_err = run("show", "protocol-conformance-test", "--json")
    assert json.loads(as_json_err.stderr)["reason"] == "unknown-skill"


def test_validate_takes_skills_dir_as_every_other_catalog_command_does(tmp_path: Path) -> None:
    write(tmp_path / "one" / "alpha" / "SKILL.md", GOOD.format(name="alpha", phase="wire"))
    write(tmp_path / "two" / "beta" / "SKILL.md", "---\nname: beta\ndescription: [unclosed\n---\nbody\n")
    positional = run("validate", "--json", str(tmp_path / "one"), str(tmp_path / "two"))
    assert positional.returncode == 1 and as_json(positional)["errors"] == 1  # beta's frontmatter
    for flag in ("--skills-dir", "--packs-root"):
        flagged = run("validate", "--json", flag, str(tmp_path / "one"), flag, str(tmp_path / "two"))
        assert flagged.returncode == 1 and as_json(flagged) == as_json(positional)
    mixed = run("validate", "--json", str(tmp_path / "one"), "--skills-dir", str(tmp_path / "two"))
    assert as_json(mixed)["roots"] == as_json(positional)["roots"]
