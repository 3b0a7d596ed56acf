"""What an answer costs a model's context: bytes of each read tool's result, per collection.

    python -m bench.answer_sizes ROOT [ROOT...]

For each root (a skill collection): the default ``skill_list`` page, ``skill_load`` of every
skill and ``skill_file`` of each skill's largest text file other than SKILL.md, through the
SDK's own client against the real server over stdio. A result is counted as a client that
hands the model everything it got would count it: the JSON of every content block plus the JSON
of ``structuredContent`` (what pydantic-ai, openai-agents, the MCP Inspector or a host that
shows both would pass on), beside the size of the file text itself. Prints one Markdown table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters


def _cost(result: Any) -> tuple[int, int]:
    """(bytes of the content blocks as JSON, bytes of structuredContent as JSON)."""
    content = sum(len(block.model_dump_json(by_alias=True, exclude_none=True)) for block in result.content)
    structured = len(json.dumps(result.structured_content, ensure_ascii=False)) if result.structured_content else 0
    return content, structured


async def _measure(root: Path) -> dict[str, Any]:
    # PYTHONPATH passes through, so another checkout's server can be measured with this client.
    env = {"SKILL_MCP_LOG": "error", **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "skill_mcp.server", "--skills-dir", str(root)], env=env
    )
    out: dict[str, Any] = {"root": root.name if root.name != "skills" else root.parent.name}
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        listed = await client.call_tool("skill_list", {})
        out["list"] = _cost(listed)
        page = listed.structured_content or {}
        out["skills"] = page.get("total", 0)
        names = [s["name"] for s in page.get("skills", [])]
        while page.get("nextCursor"):
            page = (await client.call_tool("skill_list", {"cursor": page["nextCursor"]})).structured_content or {}
            names += [s["name"] for s in page.get("skills", [])]
        loads, files, text = [], [], []
        for name in names:
            loaded = await client.call_tool("skill_load", {"name": name})
            loads.append(_cost(loaded))
            manifest = [f for f in (await _manifest(root, name)) if f["path"] != "SKILL.md"]
            if manifest:
                biggest = max(manifest, key=lambda f: f["size"])
                read = await client.call_tool("skill_file", {"name": name, "paths": [biggest["path"]]})
                files.append(_cost(read))
                text.append(biggest["size"])
        out["load"] = loads
        out["file"] = files
        out["fileText"] = text
    return out


async def _manifest(root: Path, name: str) -> list[dict[str, Any]]:
    skill = next((p.parent for p in root.rglob("SKILL.md") if p.parent.name == name), None)
    if skill is None:
        return []
    return [
        {"path": str(p.relative_to(skill)), "size": p.stat().st_size}
        for p in skill.rglob("*")
        if p.is_file() and p.suffix in (".md", ".txt", ".py", ".js", ".ts", ".sh", ".json", ".yaml", ".yml")
    ]


def _row(m: dict[str, Any]) -> str:
    lc, ls = m["list"]
    loads = [c + s for c, s in m["load"]]
    files = [c + s for c, s in m["file"]]
    biggest = max(range(len(files)), key=lambda i: m["fileText"][i]) if files else None
    big = f"{m['fileText'][biggest] / 1024:.1f} KB file: {files[biggest] / 1024:.1f} KB" if biggest is not None else "-"
    return (
        f"| {m['root']} | {m['skills']} | {(lc + ls) / 1024:.1f} KB ({lc / 1024:.1f} + {ls / 1024:.1f}) | "
        f"{sum(loads) / max(len(loads), 1) / 1024:.1f} KB | {max(loads, default=0) / 1024:.1f} KB | "
        f"{sum(files) / 1024:.1f} KB for {sum(m['fileText']) / 1024:.1f} KB of text | {big} |"
    )


def main(argv: list[str]) -> int:
    print(
        "| collection | skills | skill_list page (content + structured) | skill_load mean | skill_load max | "
        "skill_file, largest file of each skill | largest file |"
    )
    print("|---|---|---|---|---|---|---|")
    for root in argv:
        print(_row(anyio.run(_measure, Path(root))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
