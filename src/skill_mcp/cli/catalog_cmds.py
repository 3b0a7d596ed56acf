"""``index``, ``list``, ``search`` and ``show``: read the catalog directly, no server needed.

They build the catalog exactly as ``serve`` would (same settings, same discovery), so what
they print is what a client would be served.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from skill_mcp.cli import exits
from skill_mcp.cli.output import emit, emit_json, warn
from skill_mcp.reasons import SKILL_REFUSALS, Level, ProblemReason


def load_catalog(args: argparse.Namespace) -> Any:
    """The settings and the catalog ``serve`` would build, after the roots were spoken for
    (``cli.roots``), with progress on a terminal (``cli.progress``)."""
    from skill_mcp.catalog import build_catalog
    from skill_mcp.cli.progress import Progress
    from skill_mcp.cli.roots import announce
    from skill_mcp.config import load_settings

    settings = load_settings(args.skills_dirs, os.environ)
    announce(settings, json_mode=bool(getattr(args, "json", False)))
    with Progress.on_stderr("reading skills") as progress:
        catalog = build_catalog(settings, progress=progress.update)
    return settings, catalog


def missing_roots(catalog: Any) -> list[str]:
    """The configured roots that are not directories (each a ``root-missing`` problem)."""
    return [p.path for p in catalog.problems if p.reason == ProblemReason.ROOT_MISSING]


def report_missing_roots(catalog: Any, *, json_mode: bool, code: int) -> int:
    """``code``, or 3 when a root is not a directory.

    A mistyped ``--skills-dir`` otherwise looks like an empty catalog: the command still shows
    what the other roots hold; the root it could not read was named at start (``cli.roots``).
    """
    return exits.UNAVAILABLE if missing_roots(catalog) else code


def _meant_as_skill(problem: Any) -> bool:
    """A directory without SKILL.md that looks meant as a skill: its detail names a ``skill.md``
    in another case or a SKILL.md below it (``catalog.roots``). Plain folders (``docs/``) are not."""
    from skill_mcp.catalog.roots import NO_SKILL_MD_DETAIL

    return bool(problem.reason == ProblemReason.NO_SKILL_MD and problem.detail != NO_SKILL_MD_DETAIL)


def not_served(catalog: Any) -> dict[str, int]:
    """Directories refused a place in the catalog, and those meant as skills that are not one,
    counted by reason."""
    paths: dict[str, str] = {}
    for p in catalog.problems:
        if (p.level == Level.ERROR and p.reason in SKILL_REFUSALS) or _meant_as_skill(p):
            paths.setdefault(p.path, str(p.reason))
    counts: dict[str, int] = {}
    for reason in paths.values():
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def not_served_summary(catalog: Any, args: argparse.Namespace) -> str | None:
    """``list``'s last line on stderr: how many skill directories were not served, and why."""
    counts = not_served(catalog)
    if not counts:
        return None
    total = sum(counts.values())
    why = ", ".join(f"{n} {reason}" for reason, n in counts.items())
    roots = " ".join(shlex.quote(r) for r in args.skills_dirs)
    return (
        f"skill-mcp: {len(catalog.skills)} served, {total} not served ({why}); "
        f"`skill-mcp validate{' ' + roots if roots else ''}` says why for each"
    )


def phase_of(skill: Any) -> str | None:
    if skill.phase:
        return str(skill.phase)
    meta = skill.frontmatter.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("phase"), str):
        return str(meta["phase"])
    return None


def _skill_row(skill: Any) -> dict[str, Any]:
    from skill_mcp.catalog.files import SKILL_MD, skill_uri

    # A skill's URI is its SKILL.md's on every surface (the tools, resources, search, the CLI).
    row: dict[str, Any] = {
        "name": skill.name,
        "description": skill.description,
        "uri": skill_uri(skill, SKILL_MD),
        "path": skill.found_at,
        "files": len(skill.files),
    }
    for key, value in (("pack", skill.pack), ("phase", phase_of(skill)), ("tags", list(skill.tags))):
        if value:
            row[key] = value
    return row


def _packs(catalog: Any) -> list[dict[str, Any]]:
    """Every pack.json the catalog's discovery reached, loaded or refused (one discovery: the
    packs listed here are the ones whose skills ``list`` and the server serve)."""
    from skill_mcp.catalog.packs import load_pack
    from skill_mcp.models import Problem

    out: list[dict[str, Any]] = []
    for directory in catalog.packs:
        pack = load_pack(directory)
        if isinstance(pack, Problem):
            out.append({"path": str(directory), "refused": pack.to_dict()})
        else:
            out.append({"path": str(directory), "name": pack.name, "version": pack.version, "skills": len(pack.skills)})
    return out


def refusals_of(catalog: Any, name: str) -> list[Any]:
    """The problems that refused the skill ``name``, once each.

    Only a refusing reason at level error explains why a name is not served: the same skill's
    warnings (a long description) and its script or file problems are reported beside the
    refusal but did not cause it. Two directories refused for one duplicate name share one
    detail, so it is said once.
    """
    seen: dict[tuple[str, str], Any] = {}
    for p in catalog.problems:
        if p.skill == name and p.level == Level.ERROR and p.reason in SKILL_REFUSALS:
            seen.setdefault((str(p.reason), p.detail), p)
    return list(seen.values())


def _short(text: str, width: int = 88) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def run_index(args: argparse.Namespace) -> int:
    settings, catalog = load_catalog(args)
    packs = _packs(catalog)
    skills = [_skill_row(s) for s in catalog.skills.values()]
    problems = [p.to_dict() for p in catalog.problems]
    if args.json:
        emit_json(
            {
                "roots": [str(r) for r in settings.roots],
                "rootsFrom": settings.roots_from,
                "packs": packs,
                "skills": skills,
                "problems": problems,
            }
        )
        return exits.OK
    emit(f"roots ({settings.roots_from}): {', '.join(str(r) for r in settings.roots)}")
    emit(f"packs: {len(packs)}")
    for pack in packs:
        if "refused" in pack:
            emit(f"  {pack['path']}  REFUSED ({pack['refused']['reason']}): {pack['refused']['detail']}")
        else:
            emit(f"  {pack['name']} {pack['version']}  {pack['skills']} skills  {pack['path']}")
    emit(f"skills: {len(skills)}")
    for row in skills:
        extra = "".join(f"  [{k}: {row[k]}]" for k in ("pack", "phase") if k in row)
        emit(f"  {row['name']}  ({row['files']} files){extra}  {row['path']}")
    emit(f"problems: {len(problems)}")
    for p in problems:
        emit(f"  {p['level']}: {p['reason']}: {p['path']}: {p['detail']}")
    return exits.OK


def run_list(args: argparse.Namespace) -> int:
    _settings, catalog = load_catalog(args)
    skills = [s for s in catalog.skills.values() if args.phase is None or phase_of(s) == args.phase]
    if args.json:
        emit_json({"skills": [_skill_row(s) for s in skills], "count": len(skills), "phase": args.phase})
        summary = not_served_summary(catalog, args)
        if summary:
            sys.stderr.write(json.dumps({"warning": summary, "notServed": not_served(catalog)}, sort_keys=True) + "\n")
        return report_missing_roots(catalog, json_mode=True, code=exits.OK)
    width = max((len(s.name) for s in skills), default=0)
    for skill in skills:
        emit(f"{skill.name.ljust(width)}  {_short(skill.description)}")
    if catalog.skills and not skills:
        phases = sorted({p for p in map(phase_of, catalog.skills.values()) if p})
        warn(
            f"no skills in phase {args.phase!r}"
            + (f"; the phases served: {', '.join(phases)}" if phases else "; no served skill names a phase")
        )
    summary = not_served_summary(catalog, args)
    if summary:
        warn(summary)
    return report_missing_roots(catalog, json_mode=False, code=exits.OK)


def run_search(args: argparse.Namespace) -> int:
    from skill_mcp.search import MAX_LIMIT, StoredIndexError, index_catalog, search_result

    if not 1 <= args.limit <= MAX_LIMIT:
        raise exits.CliError(exits.USAGE, f"--limit must be between 1 and {MAX_LIMIT}")
    query = " ".join(args.query)
    from skill_mcp.cli.progress import Progress

    settings, catalog = load_catalog(args)
    with Progress.on_stderr("indexing skills for search") as progress:
        try:
            index = index_catalog(catalog, settings.cache_dir, progress=progress.update)
        except StoredIndexError:  # a persisted index proved damaged: never an answer, build afresh
            index = index_catalog(catalog, settings.cache_dir, reuse=False, progress=progress.update)
    result = search_result(catalog, index, query, args.limit)
    if args.json:
        emit_json(result)
    else:
        for i, hit in enumerate(result["hits"], 1):
            emit(f"{i:>2}. {hit['name']}  ({hit['score']:.3f})  {_short(hit['description'], 70)}")
            emit(f"    {hit['reason']}")
        if catalog.skills and not result["hits"]:
            warn(f"no skill matches {query!r}")
        elif result["match"] == "weak":
            warn(f"no skill matches {query!r} well: these are only the closest")
    return report_missing_roots(catalog, json_mode=args.json, code=exits.OK if result["hits"] else exits.PROBLEM)


def run_show(args: argparse.Namespace) -> int:
    from skill_mcp.catalog.files import SKILL_MD, DigestMemo, file_info, read_body, skill_uri
    from skill_mcp.errors import SkillMcpError

    _settings, catalog = load_catalog(args)
    skill = catalog.skills.get(args.name)
    if skill is None:
        refusals = refusals_of(catalog, args.name)
        if refusals:
            why = "; ".join(f"({p.reason}) {p.detail}" for p in refusals)
            raise exits.CliError(exits.PROBLEM, f"{args.name!r} is not served {why}", str(refusals[0].reason))
        missing = missing_roots(catalog)
        if missing:
            # The root itself was named at start (cli.roots): say only that it is the likely cause.
            raise exits.CliError(
                exits.UNAVAILABLE,
                f"no skill named {args.name!r} (a root is not a directory: above)",
                ProblemReason.ROOT_MISSING,
            )
        from skill_mcp.surfaces.state import closest_names

        closest = closest_names(catalog.skills, args.name)
        hint = f"; closest: {', '.join(closest)}" if closest else ""
        unserved = [p for p in catalog.problems if _meant_as_skill(p) and os.path.basename(p.path) == args.name]
        if unserved:  # the directory is there, but is not a skill: say why
            hint = f"; {unserved[0].path}: {unserved[0].detail}"
        raise exits.CliError(exits.PROBLEM, f"no skill named {args.name!r}{hint}", "unknown-skill")
    memo = DigestMemo()
    try:
        body = read_body(skill)
        manifest = []
        for entry in skill.files:
            info = file_info(memo, skill, entry)
            manifest.append(
                {"path": info.rel, "size": info.size, "digest": info.digest, "uri": skill_uri(skill, info.rel)}
            )
    except (SkillMcpError, OSError) as err:
        raise exits.CliError(exits.UNAVAILABLE, f"{args.name}: {err}") from err
    if args.json:
        emit_json(
            {**_skill_row(skill), "frontmatter": dict(skill.frontmatter), "instructions": body, "manifest": manifest}
        )
        return report_missing_roots(catalog, json_mode=True, code=exits.OK)
    emit(f"# {skill.name}  ({skill_uri(skill, SKILL_MD)})")
    emit(skill.description)
    emit("")
    emit(body.rstrip("\n"))
    emit("")
    emit(f"Files ({len(manifest)}):")
    for f in manifest:
        emit(f"  {f['path']}  {f['size']} bytes  {f['digest']}")
    return report_missing_roots(catalog, json_mode=False, code=exits.OK)
