"""``skill-mcp validate [ROOT...] [--strict]``: every problem of every skill; exit 1 on any error."""

from __future__ import annotations

import argparse
import os
from collections import Counter

from skill_mcp.cli import exits
from skill_mcp.cli.output import emit, emit_json


def run(args: argparse.Namespace) -> int:
    from skill_mcp.catalog import build_catalog
    from skill_mcp.cli.progress import Progress
    from skill_mcp.cli.roots import announce
    from skill_mcp.config import load_settings
    from skill_mcp.reasons import Level
    from skill_mcp.validate import validate_catalog

    settings = load_settings(args.skills_dirs, os.environ)
    announce(settings, json_mode=bool(args.json))
    with Progress.on_stderr("reading skills") as progress:
        catalog = build_catalog(settings, progress=progress.update)
    with Progress.on_stderr("checking the floors") as progress:
        problems = validate_catalog(catalog, strict=args.strict, progress=progress.update)
    errors = sum(1 for p in problems if p.level == Level.ERROR)
    warnings = len(problems) - errors
    by_reason = dict(sorted(Counter(str(p.reason) for p in problems).items()))
    if args.json:
        emit_json(
            {
                "roots": [str(r) for r in settings.roots],
                "strict": bool(args.strict),
                "skills": len(catalog.skills),
                "errors": errors,
                "warnings": warnings,
                "byReason": by_reason,
                "problems": [p.to_dict() for p in problems],
                "ok": errors == 0,
            }
        )
    else:
        for p in problems:
            rule = f" ({p.rule})" if p.rule else ""
            emit(f"{p.level}: {p.reason}{rule}: {p.path}: {p.detail}")
        verdict = "ok" if errors == 0 else "FAILED"
        emit(
            f"{verdict}: {len(catalog.skills)} skills served, {errors} errors, {warnings} warnings"
            + (" (strict floors applied)" if args.strict else "")
        )
        width = max((len(reason) for reason in by_reason), default=0)
        for reason, count in by_reason.items():
            emit(f"  {reason.ljust(width)}  {count}")
    # An existing root with nothing in it would pass vacuously: its ``root-empty`` warning is
    # among the problems above, so a CI gate pointed at the wrong directory does not look green.
    return exits.PROBLEM if errors else exits.OK
