"""One skill's declaration past the broker's bounds costs that skill its scripts, and only that skill.

The bounds are written once (``grantrules.DECLARATION_BOUNDS``); the catalog refuses a block
past them as ``declaration-invalid`` (so ``validate`` and ``skill_list`` say so), and the
appliance's broker, which reads the same numbers, drops only a skill whose entry breaks them
(``tests/appliance/test_launcher_checks.py``; in the real image ``tests/appliance/test_broker_bounds.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skill_mcp import declwire
from skill_mcp.catalog.declaration import DeclarationError, build_declaration
from skill_mcp.grantrules import DECLARATION_BOUNDS as BOUNDS
from skill_mcp_launcher.proxy import valid_host
from tests.cli.helpers import as_json, run, write
from tests.fence.limits_table import documented_table


def _block(
    *,
    scripts: int = 1,
    hosts: int = 0,
    env: int = 0,
    top_env: int = 0,
    script_chars: int = 0,
    interpreter: str = "python",
) -> dict[str, Any]:
    # A path of exactly ``script_chars`` characters, in segments a file system accepts.
    script = (
        ("a" * 99 + "/") * (script_chars // 100) + "b" * (script_chars % 100 or 1) if script_chars else "scripts/a0.py"
    )
    assert not script_chars or len(script) == script_chars
    run_rows = [
        {
            "script": script if i == 0 else f"scripts/a{i}.py",
            "interpreter": interpreter,
            "env": [f"V{j}" for j in range(env)],
        }
        for i in range(scripts)
    ]
    return {
        "version": 1,
        "run": run_rows,
        "egress": [f"h{i}.example.com" for i in range(hosts)],
        "env": [f"V{j}" for j in range(top_env)],
    }


@pytest.mark.parametrize("field", ["scripts", "hosts", "env", "top_env"])
def test_declaration_cannot_name_more_than_the_bound(field: str) -> None:
    bound = BOUNDS.scripts if field == "scripts" else BOUNDS.hosts if field == "hosts" else BOUNDS.names
    declaration, _ = build_declaration(_block(**{field: bound}))  # type: ignore[arg-type]  # one int bound  # the positive control: at the bound
    assert declaration.run
    with pytest.raises(DeclarationError, match=f"at most {bound}"):
        build_declaration(_block(**{field: bound + 1}))  # type: ignore[arg-type]


def test_declaration_cannot_name_a_script_path_or_interpreter_past_the_bound() -> None:
    build_declaration(_block(script_chars=BOUNDS.script_chars))
    with pytest.raises(DeclarationError):
        build_declaration(_block(script_chars=BOUNDS.script_chars + 1))
    with pytest.raises(DeclarationError):
        build_declaration(_block(interpreter="p" * (BOUNDS.interpreter_chars + 1)))


def test_what_the_catalog_accepts_at_every_bound_the_broker_accepts() -> None:
    declaration, _ = build_declaration(_block(scripts=BOUNDS.scripts, hosts=BOUNDS.hosts, env=BOUNDS.names))
    doc = {
        "uid": 1,
        "skills": [
            {
                "name": "s",
                "directory": "/d",
                "skillMd": [1, 2, 3, 4, 5],
                "egress": list(declaration.egress),
                "scripts": [
                    {"script": r.script, "interpreter": r.interpreter, "env": list(r.env), "timeout": r.timeout}
                    for r in declaration.run
                ],
            }
        ],
    }
    found = declwire.decode(json.dumps(doc).encode())
    assert set(found.skills) == {"s"} and not found.dropped
    assert all(valid_host(h) for h in declaration.egress)


def _skills(root: Path) -> Path:
    hosts = "".join(f"    - h{i}.example.com\n" for i in range(300))
    write(
        root / "many" / "SKILL.md",
        "---\nname: many\ndescription: Names three hundred hosts.\nmcp-host:\n"
        "  version: 1\n  run:\n    - script: scripts/a.py\n      interpreter: python\n  egress:\n"
        + hosts
        + "---\n# many\n",
    )
    write(root / "many" / "scripts" / "a.py", "print('many')\n")
    write(
        root / "ok" / "SKILL.md",
        "---\nname: ok\ndescription: The neighbour.\nmcp-host:\n  version: 1\n"
        "  run:\n    - script: scripts/a.py\n      interpreter: python\n---\n# ok\n",
    )
    write(root / "ok" / "scripts" / "a.py", "print('ok')\n")
    return root


@pytest.mark.slow
def test_300_hosts_in_one_declaration_are_reported_by_validate_and_skill_list(tmp_path: Path) -> None:
    root = _skills(tmp_path / "skills")
    report = as_json(run("validate", "--json", str(root)))
    assert [(p["skill"], p["reason"]) for p in report["problems"]] == [("many", "declaration-invalid")]
    listed = as_json(run("call", "skill_list", "--json", "--skills-dir", str(root)))["structuredContent"]
    assert [(p["skill"], p["reason"]) for p in listed["problems"]] == [("many", "declaration-invalid")]
    scripts = {s["name"]: s["scripts"] for s in listed["skills"]}
    assert scripts["many"] == []
    assert [s["state"] for s in scripts["ok"]] == ["runnable"]  # the positive control: the neighbour runs


def test_the_limits_table_states_the_declaration_bounds() -> None:
    documented = documented_table()
    assert {k: documented.get(k) for k in BOUNDS.table()} == {k: (v, v) for k, v in BOUNDS.table().items()}
