"""``skill-mcp pack lock ROOT``: pin every file of every skill in a pack by SHA-256.

The skills are found with the catalog's own loader (so a pack pins exactly the files the
server serves), but without verifying an existing pack.json - locking is how a changed pack
is re-pinned. Phase and tags come from each SKILL.md's ``metadata.phase`` / ``metadata.tags``,
else from the existing pack.json entry; the pack's name, version and description from the
flags, else from the existing pack.json, else the directory name and ``0.1.0``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from skill_mcp.cli import exits
from skill_mcp.cli.output import emit, emit_json, warn

LOCK_DEPTH = 4


def _candidates(directory: Path, pack_root: Path, depth: int = 0) -> list[Path]:
    """Skill directories a layout reaches under the pack, not descending into nested packs."""
    from skill_mcp.catalog.files import SKILL_MD
    from skill_mcp.catalog.packs import PACK_JSON

    if (directory / SKILL_MD).is_file():
        return [directory]
    found: list[Path] = []
    try:
        children = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return found
    for entry in children:
        child = directory / entry.name
        if entry.name.startswith(".") or not child.is_dir() or (child / PACK_JSON).is_file():
            continue
        if (child / SKILL_MD).is_file():
            found.append(child)
        elif depth < LOCK_DEPTH:
            found.extend(_candidates(child, pack_root, depth + 1))
    return found


def _phase(frontmatter: Any, previous: Any) -> str | None:
    meta = frontmatter.get("metadata") if isinstance(frontmatter, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get("phase"), str) and meta["phase"].strip():
        return str(meta["phase"]).strip()
    return previous.phase if previous is not None else None


def collect(root: Path, previous: Any, progress: Any = None) -> tuple[list[Any], list[Any]]:
    """Pinned entries for every loadable skill under ``root``, and the problems of the rest."""
    from skill_mcp.catalog.files import DigestMemo, file_digest
    from skill_mcp.catalog.packs import PACK_JSON, PinnedSkill, posix_rel
    from skill_mcp.catalog.skill import load_skill
    from skill_mcp.paths import is_inside

    root_real = Path(os.path.realpath(root))
    memo = DigestMemo()
    queue = _candidates(root, root)
    entries: list[PinnedSkill] = []
    problems: list[Any] = []
    seen: set[Path] = set()
    done = 0
    while queue:
        if progress is not None:
            progress(done, done + len(queue))
        done += 1
        found_at = queue.pop(0)
        real = Path(os.path.realpath(found_at))
        if real in seen or not is_inside(root_real, real):
            continue
        seen.add(real)
        loaded = load_skill(real, found_at, root_real)
        problems.extend(loaded.problems)
        queue.extend(loaded.nested)
        skill = loaded.skill
        if skill is None:
            continue
        rel = posix_rel(root_real, real)
        prev = previous.pinned_at(real) if previous is not None else None
        files = {f.rel: file_digest(memo, skill, f) for f in skill.files if not (rel == "." and f.rel == PACK_JSON)}
        entries.append(
            PinnedSkill(
                name=skill.name,
                path=rel,
                files=files,
                phase=_phase(skill.frontmatter, prev),
                tags=skill.tags or (prev.tags if prev is not None else ()),
            )
        )
    return entries, problems


def run_lock(args: argparse.Namespace) -> int:
    from skill_mcp.catalog.packs import PACK_JSON, Pack, load_pack, render_pack
    from skill_mcp.cli.progress import Progress
    from skill_mcp.cli.roots import announce
    from skill_mcp.config import load_settings
    from skill_mcp.models import Problem
    from skill_mcp.reasons import Level

    root = Path(args.root)
    if not root.is_dir():
        raise exits.CliError(exits.UNAVAILABLE, f"{root} is not a directory")
    announce(load_settings([str(root)], os.environ), json_mode=bool(args.json))
    target = root / PACK_JSON
    previous: Pack | None = None
    if target.is_file():
        loaded = load_pack(root)
        if isinstance(loaded, Problem):
            warn(f"warning: the existing pack.json is ignored ({loaded.reason}): {loaded.detail}")
        else:
            previous = loaded
    with Progress.on_stderr("pinning skills") as progress:
        entries, problems = collect(root, previous, progress.update)
    name = args.name or (previous.name if previous else Path(os.path.realpath(root)).name)
    version = args.pack_version or (previous.version if previous else "0.1.0")
    text = render_pack(name, version, entries, previous.description if previous else None)
    current = target.read_bytes() if target.is_file() else None
    up_to_date = current == text.encode("utf-8")
    if not args.check and not up_to_date:
        tmp = root / f".{PACK_JSON}.tmp-{os.getpid()}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    errors = [p for p in problems if p.level == Level.ERROR]
    if args.json:
        emit_json(
            {
                "path": str(target),
                "name": name,
                "version": version,
                "check": bool(args.check),
                "upToDate": up_to_date,
                "written": not args.check and not up_to_date,
                "skills": [{"name": e.name, "path": e.path, "files": len(e.files)} for e in entries],
                "problems": [p.to_dict() for p in problems],
            }
        )
    else:
        for p in problems:
            warn(f"{p.level}: {p.path}: {p.reason}: {p.detail}")
        if args.check:
            emit(f"{target}: {'up to date' if up_to_date else 'OUT OF DATE'} ({len(entries)} skills)")
        else:
            emit(
                f"{target}: {'unchanged' if up_to_date else 'written'}: pack {name} {version}, "
                f"{len(entries)} skills, {sum(len(e.files) for e in entries)} files pinned"
            )
    if errors or (args.check and not up_to_date):
        return exits.PROBLEM
    return exits.OK
