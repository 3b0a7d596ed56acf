"""``skill-mcp validate``: every problem of every skill, and with ``--strict`` the floors.

Plain validation is the catalog's own scan: whatever would keep a directory from being
served (or be served with a warning) is reported, for every skill, never stopping at the
first. ``--strict`` adds quality floors beyond the Agent Skills spec, each a stable reason
with a fix hint (docs/cli.md lists them):

    floor-description-when          the description does not say when to use the skill
    floor-description-short         the description is too short to choose the skill by
    floor-no-steps                  the body has no actionable steps (no list, no numbered step)
    floor-body-too-long             the body is over 500 lines (move detail into references)
    floor-missing-reference         the body points at a file of this skill that is not there
    floor-reference-outside-skill   the body points at a relative path outside this skill
    credential-like                 a file holds a string that looks like a credential

Floors are error-level under ``--strict`` (a CI gate), so they fail the run like any error.
Each is meant to be trusted on real skills: the public collections (anthropics/skills,
obra/superpowers, openai/skills) are the calibration, and a floor that fires there must name
a true problem. The bundled ``validate-skills-directory`` skill runs this module, not a copy.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from skill_mcp.catalog.files import read_body, read_skill_file
from skill_mcp.errors import SkillMcpError
from skill_mcp.limits import READ_CAPS
from skill_mcp.models import Catalog, Problem, Skill
from skill_mcp.reasons import Level, ProblemReason

MAX_BODY_LINES = 500
MIN_DESCRIPTION_CHARS = 40
SCAN_MAX_BYTES = READ_CAPS.credential_scan  # files larger than this are not scanned for credentials

# Saying *when* takes many forms in real descriptions: "Use when ...", "whenever the user ...",
# "guidance ... when building a new screen", "you must use this before any design work", "use
# this skill any time a deck is involved", "TRIGGER - read this before ...". The floor is for
# descriptions that only say what a skill is ("Toolkit for X. Supports Y."), so each form counts.
_WHEN = re.compile(
    r"\b(when|whenever|before|after|any ?time|if (the |a )?(user|you|someone|asked|needed|requested)"
    r"|(use|used|using|invoke|load|apply|run) (it |this |this skill |them )?(for|to|if|on|in|with|once|during)"
    r"|for tasks?|triggers?|applies to)\b",
    re.IGNORECASE,
)
_STEP = re.compile(
    r"^\s*(\d+[.)]\s+\S|[-*+]\s+\S|#+\s*(step|steps|how to|usage|workflow|process|procedure"
    r"|quick ?start)\b)",
    re.IGNORECASE | re.MULTILINE,
)
_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_PATH = re.compile(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)`")
_REF_DIRS = frozenset({"scripts", "references", "reference", "assets", "examples", "templates", "docs"})
_CODE_SPAN = re.compile(r"`[^`]*`")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(\d+[.)]|[-*+])\s")
_EXAMPLE = re.compile(r"\b(examples?|e\.g\.|for instance|such as)\b", re.IGNORECASE)

_CREDENTIALS = [
    ("an AWS access key id", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("an Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("an OpenAI-style API key", re.compile(r"\bsk-(proj-)?[A-Za-z0-9]{32,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
]
_ASSIGNMENT = re.compile(
    r"(?i)\b(api[_-]?key|apikey|secret|token|password|passwd)\b[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+_=.-]{20,})"
)
_PLACEHOLDER = re.compile(r"(?i)(\$\{|<|\$[A-Z_]|x{4,}|example|your[_-]|changeme|dummy|placeholder|redacted|\*{3,})")


@dataclass(frozen=True, slots=True)
class Floor:
    reason: ProblemReason
    hint: str


FLOORS = {
    ProblemReason.FLOOR_DESCRIPTION_WHEN: "add a clause such as 'Use when ...' naming the tasks that should pick it",
    ProblemReason.FLOOR_DESCRIPTION_SHORT: f"say what the skill does and when, in at least {MIN_DESCRIPTION_CHARS} characters",
    ProblemReason.FLOOR_NO_STEPS: "give the procedure as numbered steps or a bulleted list of actions",
    ProblemReason.FLOOR_BODY_TOO_LONG: f"keep SKILL.md under {MAX_BODY_LINES} lines; move detail into references/",
    ProblemReason.FLOOR_MISSING_REFERENCE: "add the file to the skill, or fix the path the body mentions",
    ProblemReason.FLOOR_REFERENCE_OUTSIDE_SKILL: "copy the file into this skill, or name the other skill so a "
    "client loads it (skill_load) instead of following a path",
    ProblemReason.CREDENTIAL_LIKE: "remove the secret (rotate it), and read it from the environment instead",
}


def _problem(skill: Skill, reason: ProblemReason, detail: str, path: str | None = None) -> Problem:
    return Problem(path or skill.found_at, reason, f"{detail} - fix: {FLOORS[reason]}", Level.ERROR, skill.name)


def _blocks(body: str) -> Iterable[list[str]]:
    """The body's blocks (runs of non-blank lines), fenced code left out: a link or path in a
    code sample is part of the sample (a skill about writing skills shows other skills' links)."""
    block: list[str] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.strip():
            block.append(line)
            continue
        if block:
            yield block
            block = []
    if block:
        yield block


def _says_example(text: str) -> bool:
    # The words outside code spans: `examples/faq.md` is a folder name, not "for example".
    return bool(_EXAMPLE.search(_CODE_SPAN.sub("", text)))


def _code_paths(text: str) -> set[str]:
    return {
        path
        for path in _CODE_PATH.findall(text)
        if path.split("/", 1)[0] in _REF_DIRS and "." in path.rsplit("/", 1)[-1]
    }


def _references(body: str) -> set[str]:
    """Relative file paths the body points at: Markdown link targets and code spans like
    `scripts/fill.py` whose first segment is a conventional skill folder.

    Outside fenced code only. A code span said as an example ("Examples: `references/x.md`",
    or a list introduced by a paragraph that gives an example and ends with a colon) names a
    file some skill might have, not one this skill claims; a Markdown link is always a claim.
    """
    refs: set[str] = set()
    example_list = False
    for block in _blocks(body):
        text = "\n".join(block)
        for target in _LINK.findall(text):
            target = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if target and "://" not in target and not target.startswith(("/", "mailto:", "#")):
                refs.add(target[2:] if target.startswith("./") else target)
        first_item = next((i for i, line in enumerate(block) if _LIST_ITEM.match(line)), len(block))
        head = " ".join(block[:first_item])
        if head:
            illustrative = _says_example(head)
            example_list = illustrative and head.rstrip().endswith(":")
            if not illustrative:
                refs |= _code_paths(head)
        for item in block[first_item:]:
            if not (example_list or _says_example(item)):
                refs |= _code_paths(item)
    return refs


def _text_problems(skill: Skill, body: str) -> Iterable[Problem]:
    description = " ".join(skill.description.split())
    if len(description) < MIN_DESCRIPTION_CHARS:
        yield _problem(
            skill, ProblemReason.FLOOR_DESCRIPTION_SHORT, f"the description has {len(description)} characters"
        )
    if not _WHEN.search(description):
        yield _problem(
            skill,
            ProblemReason.FLOOR_DESCRIPTION_WHEN,
            "the description says what the skill is but not when to use it (no 'when', 'before', "
            "'use ... for', 'if the user ...' or the like)",
        )
    if not _STEP.search(body):
        yield _problem(skill, ProblemReason.FLOOR_NO_STEPS, "the body has no numbered steps or list of actions")
    lines = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    if lines > MAX_BODY_LINES:
        yield _problem(skill, ProblemReason.FLOOR_BODY_TOO_LONG, f"the body is {lines} lines long")
    yield from _reference_problems(skill, body)


def _reference_problems(skill: Skill, body: str) -> Iterable[Problem]:
    served = {f.rel for f in skill.files}
    dirs = {rel.rsplit("/", 1)[0] for rel in served if "/" in rel}
    for ref in sorted(_references(body)):
        norm = posixpath.normpath(ref)
        if norm == ".." or norm.startswith("../"):
            yield _problem(skill, ProblemReason.FLOOR_REFERENCE_OUTSIDE_SKILL, _outside_detail(skill, ref, norm))
        elif norm not in served and norm not in dirs and not any(d.startswith(norm + "/") for d in dirs):
            yield _problem(
                skill,
                ProblemReason.FLOOR_MISSING_REFERENCE,
                f"the body mentions {ref!r}, which is not a file of this skill",
            )


def _outside_detail(skill: Skill, ref: str, norm: str) -> str:
    """Say where an outside reference leads, so the author can tell a sibling skill from a typo.

    The path is followed on disk (read-only, never served): a client reading this skill through
    the server cannot follow it at all, because every path it may ask for stays inside the skill.
    """
    said = f"the body points at {ref!r}, outside this skill: a client reading the skill cannot follow it"
    target = (skill.directory / norm).resolve()
    if target.is_relative_to(skill.directory):
        return (
            f"the body points at {ref!r}, which climbs out of this skill and back in; a client reading "
            f"the skill cannot follow '..': write it as {target.relative_to(skill.directory).as_posix()!r}"
        )
    if not target.exists():
        return f"{said}, and nothing is there either"
    parts = norm.split("/")
    if len(parts) >= 3 and parts[0] == ".." and (skill.directory.parent / parts[1] / "SKILL.md").is_file():
        return f"{said} (it is {'/'.join(parts[2:])!r} of the neighbouring skill {parts[1]!r})"
    return f"{said} (it exists on this disk, outside any skill it names)"


def credential_findings(text: str) -> list[str]:
    """What in ``text`` looks like a credential (kinds only, never the value)."""
    found = [kind for kind, pattern in _CREDENTIALS if pattern.search(text)]
    for match in _ASSIGNMENT.finditer(text):
        value = match.group(2)
        if _PLACEHOLDER.search(value) or not (re.search(r"[A-Za-z]", value) and re.search(r"\d", value)):
            continue
        found.append(f"a {match.group(1).lower()} assignment")
    return sorted(set(found))


def _credential_problems(skill: Skill) -> Iterable[Problem]:
    for entry in skill.files:
        if entry.size > SCAN_MAX_BYTES:
            continue
        try:
            data = read_skill_file(skill, entry.rel, max_bytes=SCAN_MAX_BYTES)
        except (SkillMcpError, OSError):
            continue
        if b"\x00" in data[:8192]:
            continue  # binary
        kinds = credential_findings(data.decode("utf-8", "replace"))
        if kinds:
            yield _problem(
                skill,
                ProblemReason.CREDENTIAL_LIKE,
                f"{entry.rel} holds {', '.join(kinds)}",
                path=f"{skill.found_at}/{entry.rel}",
            )


def floor_problems(skill: Skill) -> list[Problem]:
    """Every floor ``skill`` misses. Reads its files; never raises for an unreadable one."""
    try:
        body = read_body(skill)
    except (SkillMcpError, OSError):
        body = ""
    return [*_text_problems(skill, body), *_credential_problems(skill)]


def validate_catalog(
    catalog: Catalog, *, strict: bool, progress: Callable[[int, int], None] | None = None
) -> list[Problem]:
    """The catalog's problems, plus every floor of every served skill when ``strict``;
    ``progress(done, total)`` is called as the skills are checked."""
    problems = list(catalog.problems)
    if strict:
        total = len(catalog.skills)
        for done, skill in enumerate(catalog.skills.values()):
            if progress is not None:
                progress(done, total)
            problems.extend(floor_problems(skill))
        if progress is not None:
            progress(total, total)
    return problems
