"""The declared-skills document: what the unprivileged parse helper tells the appliance's broker.

The broker (root) never parses a SKILL.md; ``skill_mcp.runner.dump_declarations``, run as a uid
of its own by ``skill_mcp_launcher.parse_helper``, parses with the catalog's code and writes this
document on its stdout; the broker decodes it here. One record type and one encoder/decoder for
both ends, beside the broker's own framing (``brokerwire``)::

    {"uid": n, "skills": [{"name", "directory", "skillMd": [dev, ino, size, mtime_ns, ctime_ns],
                           "egress": [...], "scripts": [{"script", "interpreter", "env", "timeout"}]}]}

``skillMd`` is the SKILL.md's identity when it was read (``skill_md_key``), so the broker can
tell by a stat, which parses nothing, that a skill changed and ask again. Only skills that
declare scripts are listed: the others cannot run.

``decode`` trusts nothing: the text is at most ``MAX_DOCUMENT`` bytes (``limits.READ_CAPS``),
its nesting is bounded before the decoder runs (``jsonbound``), and every field is checked
for type and size before it becomes a ``DeclaredSkill``. One skill's entry out of shape or
past the bounds the catalog enforces too (``grantrules.DECLARATION_BOUNDS``) costs only that
skill (``Dropped``); a document out of shape is ``DeclaredError``.

A leaf: the standard library and the other leaves only, so the launcher imports it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skill_mcp import jsonbound
from skill_mcp.grantrules import DECLARATION_BOUNDS, NAME_RE
from skill_mcp.limits import READ_CAPS

MAX_DOCUMENT = READ_CAPS.declarations
MAX_SKILLS = 20_000
# One skill's bounds are the catalog's (``DECLARATION_BOUNDS``): what ``validate`` passes is accepted
# here, and an entry past them costs only that skill.
BOUNDS = DECLARATION_BOUNDS


def skill_md_key(directory: str) -> tuple[int, ...]:
    """The identity of ``directory``'s SKILL.md (a stat; nothing is read); ``OSError`` if it is gone."""
    st = os.stat(os.path.join(directory, "SKILL.md"))
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class DeclaredError(RuntimeError):
    """The declarations could not be read, or came back out of shape."""


@dataclass(frozen=True, slots=True)
class DeclaredScript:
    script: str
    interpreter: str
    env: tuple[str, ...]
    timeout: int


@dataclass(frozen=True, slots=True)
class DeclaredSkill:
    name: str
    directory: str
    skill_md: tuple[int, ...]
    egress: tuple[str, ...]
    scripts: tuple[DeclaredScript, ...]

    def script(self, rel: str) -> DeclaredScript | None:
        for row in self.scripts:
            if row.script == rel:
                return row
        return None

    def changed(self) -> bool:
        """True when SKILL.md is no longer the file the helper read (a stat; nothing is parsed)."""
        try:
            return skill_md_key(self.directory) != self.skill_md
        except OSError:
            return True


@dataclass(frozen=True, slots=True)
class Dropped:
    """A skill whose entry in the declarations document was out of shape or past ``BOUNDS``."""

    name: str
    detail: str
    # Its directory and SKILL.md identity, when the entry carried usable ones: the broker asks
    # the helper again only once that file changed (a stat), not on every request naming it.
    directory: str | None = None
    skill_md: tuple[int, ...] | None = None

    def changed(self) -> bool:
        if self.skill_md is None or self.directory is None:
            return True
        return DeclaredSkill(self.name, self.directory, self.skill_md, (), ()).changed()


@dataclass(frozen=True, slots=True)
class Declarations:
    skills: Mapping[str, DeclaredSkill]
    parsed_as: int  # the uid the helper ran as (the launcher chose it; the helper confirms it)
    # Skills left out, each for its own entry: one skill's declaration never costs the others.
    dropped: Mapping[str, Dropped] = field(default_factory=dict)


def _str(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or "\0" in value or len(value) > limit:
        raise DeclaredError(f"{what} is not a string of 1 to {limit} characters")
    return value


def _names(value: Any, what: str, count: int, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > count:
        raise DeclaredError(f"{what} is not a list of at most {count} entries")
    return tuple(_str(v, what, limit) for v in value)


def _script(raw: Any) -> DeclaredScript:
    if not isinstance(raw, dict):
        raise DeclaredError("a script entry is not an object")
    env = _names(raw.get("env"), "env", BOUNDS.names, BOUNDS.name_chars)
    if not all(NAME_RE.fullmatch(n) for n in env):
        raise DeclaredError("an env entry is not a plain variable name")
    timeout = raw.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout <= BOUNDS.timeout_s:
        raise DeclaredError("a timeout is not a positive whole number of seconds")
    return DeclaredScript(
        _str(raw.get("script"), "script", BOUNDS.script_chars),
        _str(raw.get("interpreter"), "interpreter", BOUNDS.interpreter_chars),
        env,
        timeout,
    )


def _skill_md(raw: Any) -> tuple[int, ...]:
    key = raw.get("skillMd") if isinstance(raw, dict) else None
    if not isinstance(key, list) or len(key) != 5 or not all(type(k) is int for k in key):
        raise DeclaredError("skillMd is not five integers")
    return tuple(key)


def _skill(raw: Any) -> DeclaredSkill:
    if not isinstance(raw, dict):
        raise DeclaredError("a skill entry is not an object")
    key = _skill_md(raw)
    scripts = raw.get("scripts")
    if not isinstance(scripts, list) or len(scripts) > BOUNDS.scripts:
        raise DeclaredError(f"scripts is not a list of at most {BOUNDS.scripts}")
    directory = _str(raw.get("directory"), "directory", BOUNDS.directory_chars)
    if not os.path.isabs(directory):
        raise DeclaredError("directory is not absolute")
    return DeclaredSkill(
        _str(raw.get("name"), "name", BOUNDS.skill_chars),
        directory,
        key,
        _names(raw.get("egress"), "egress", BOUNDS.hosts, BOUNDS.host_chars),
        tuple(_script(s) for s in scripts),
    )


def _entry_name(raw: Any) -> str | None:
    """The name an entry claims, when it is a plain one (a dropped entry is reported under it)."""
    name = raw.get("name") if isinstance(raw, dict) else None
    return name if isinstance(name, str) and 0 < len(name) <= BOUNDS.skill_chars and "\0" not in name else None


def _dropped(raw: dict[str, Any], name: str, detail: str) -> Dropped:
    try:
        key: tuple[int, ...] | None = _skill_md(raw)
    except DeclaredError:
        key = None
    directory = raw.get("directory")
    usable = (
        isinstance(directory, str)
        and os.path.isabs(directory)
        and len(directory) <= BOUNDS.directory_chars
        and "\0" not in directory
    )
    return Dropped(name, detail, directory if usable else None, key)


def decode(raw: bytes) -> Declarations:
    """The helper's document, checked for shape: every field typed and bounded.

    The document as a whole (an object with ``uid`` and at most ``MAX_SKILLS`` entries) must be
    in shape, or ``DeclaredError``; a skill entry out of shape or past ``BOUNDS`` is dropped
    alone (in ``dropped``, under the name it claims), so one skill's declaration never stops
    another's scripts. A name listed twice is dropped both times: neither entry is trusted.
    """
    if len(raw) > MAX_DOCUMENT:
        raise DeclaredError(f"the helper's output is over {MAX_DOCUMENT} bytes")
    try:
        doc = jsonbound.loads(raw)
    except ValueError as exc:
        raise DeclaredError(f"the helper's output is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("skills"), list) or len(doc["skills"]) > MAX_SKILLS:
        raise DeclaredError("the helper's output is not {uid, skills: [...]}")
    uid = doc.get("uid")
    if type(uid) is not int:
        raise DeclaredError("the helper's output has no uid")
    out: dict[str, DeclaredSkill] = {}
    dropped: dict[str, Dropped] = {}
    for entry in doc["skills"]:
        try:
            skill = _skill(entry)
        except DeclaredError as exc:
            name = _entry_name(entry)
            if name is not None and isinstance(entry, dict):
                out.pop(name, None)
                dropped[name] = _dropped(entry, name, str(exc))
            continue
        if skill.name in out or skill.name in dropped:
            out.pop(skill.name, None)
            dropped[skill.name] = Dropped(skill.name, "the skill is listed twice")
            continue
        out[skill.name] = skill
    return Declarations(out, uid, dropped)


def encode(uid: int, skills: Iterable[DeclaredSkill]) -> bytes:
    """The document for ``skills``, as the helper writes it and ``decode`` reads it back."""
    doc = {
        "uid": uid,
        "skills": [
            {
                "name": s.name,
                "directory": s.directory,
                "skillMd": list(s.skill_md),
                "egress": list(s.egress),
                "scripts": [
                    {"script": d.script, "interpreter": d.interpreter, "env": list(d.env), "timeout": d.timeout}
                    for d in s.scripts
                ],
            }
            for s in skills
        ],
    }
    return json.dumps(doc, separators=(",", ":")).encode()
