"""Scan results to and from plain JSON values, for the persistent cache (``catalog.cache``).

An entry is three JSON texts separated by tabs (a tab never occurs in JSON text): the
*listing* (where the skill was found, its listing-tier stamps, every field a listing carries,
the problems), the frontmatter, and the file rows. A warm build decodes the listing only; the
other two stay text in the record (``catalog.cached``) until an answer reads them.

The listing is a JSON array, its fields by position (``LISTING``, ``SKILL_FIELDS``): a warm
build decodes one per skill, and an object's keys are made again by every decode (the JSON
scanner shares them within one call only), which cost a third of it.

Plain JSON, never pickle: a cache file is data, and reading one must not be able to run code.
Decoding checks each field's type and raises ``TypeError``/``ValueError``/``KeyError`` on a
shape it did not write; the cache then discards the entry and loads the skill from disk.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skill_mcp.catalog.cached import CachedFiles, CachedFrontmatter, Stamp, frontmatter_text
from skill_mcp.catalog.files import SKILL_MD
from skill_mcp.catalog.loaded import Loaded
from skill_mcp.models import Declaration, EnvField, Problem, ScriptDecl, Skill, uri_path
from skill_mcp.paths import path_under
from skill_mcp.reasons import ExtensionRule, Level, ProblemReason


def _declaration(d: Declaration | None) -> Any:
    if d is None:
        return None
    return {
        "version": d.version,
        "run": [[r.script, r.interpreter, list(r.env), r.timeout, r.description] for r in d.run],
        "env": [[e.name, e.secret] for e in d.env],
        "egress": list(d.egress),
    }


# The fields of a listing and of its skill, in the order the arrays hold them.
LISTING = ("at", "root", "skill_md", "skill", "problems", "nested")
SKILL_FIELDS = ("desc", "off", "n", "decl", "missing", "excluded", "tags", "phase", "pack")


def _skill(skill: Skill | None) -> Any:
    if skill is None:
        return None
    # The description is the frontmatter's own string (the loader refuses any other kind),
    # repeated here: a listing carries it, and the frontmatter is decoded only when read.
    return [
        skill.description,
        skill.body_offset,
        len(skill.files),
        _declaration(skill.declaration),
        list(skill.missing_scripts),
        None if skill.skills_list_excluded is None else str(skill.skills_list_excluded),
        list(skill.tags),
        skill.phase,
        skill.pack,
    ]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_loaded(loaded: Loaded, found_at: str, root_real: str) -> bytes:
    """The cache entry of ``loaded``: its listing, its directories' stamps, its frontmatter and its
    file rows, four parts a tab apart. Its stamps are split in two tiers: the listing's
    ``skill_md`` and the directories' stamps hold the listing tier (SKILL.md as read; the skill
    directory and every directory walked), which a warm build checks; every other
    served file's stamp rides in its file row (its ctime beside the record's inode, size and
    mtime), which ``catalog.filetier`` checks before an answer carries a fact about that skill's
    files, and which a warm build therefore need not even parse (``CachedFiles``). ``ValueError``
    when a served file has no stamp that agrees with its record, or SKILL.md was stamped twice
    with different values (never written then: such an entry could never hold)."""
    # Stamps taken twice (before the read and again by the walk) are kept once when equal.
    stamps = list(dict.fromkeys(loaded.stamps))
    skill = loaded.skill
    served = {f.rel: f for f in skill.files} if skill is not None else {}
    listing: list[Any] = []
    skill_md: list[int] | None = None
    ctimes: dict[str, int] = {}
    for s in stamps:
        rel = s[0]
        f = served.get(rel)
        if rel == SKILL_MD:
            # Kept apart: discovery's ``lstat`` of SKILL.md checks it (``catalog.cache``). Two
            # stamps of it that differ (a rewrite during the scan) could never both hold.
            if skill_md is not None:
                raise ValueError("SKILL.md changed during the scan")
            skill_md = list(s[1:])
        elif f is None:
            listing.append(list(s))
        if f is None:
            continue
        if (f.ino, f.size, f.mtime_ns) != s[1:4] or ctimes.setdefault(rel, s[4]) != s[4]:
            raise ValueError(f"the stamp of {rel} disagrees with its record")
    if served.keys() - ctimes.keys():
        raise ValueError("a served file has no stamp")
    rows = [] if skill is None else [[f.rel, f.size, f.mtime_ns, f.ino, ctimes[f.rel]] for f in skill.files]
    head = [
        found_at,
        root_real,
        skill_md,
        _skill(skill),
        [[p.path, str(p.reason), p.detail, str(p.level), p.skill, p.rule] for p in loaded.problems],
        [str(n) for n in loaded.nested],
    ]
    frontmatter = b"{}" if skill is None else frontmatter_text(skill.frontmatter)
    # The directories' stamps in a part of their own: a warm build whose scan helper found them
    # holding (``catalog.verdicts``) never decodes them, which was half a listing's decode.
    return b"\t".join((_dumps(head), _dumps(listing), frontmatter, _dumps(rows)))


_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def one_value(text: str) -> Any:
    """The one JSON value ``text`` is, read by the scanner ``json.loads`` ends in, called directly:
    a warm build decodes one listing per skill and a search one headings line per hit, and the
    wrappers (encoding detection, the Python-level decoder) cost a third to half of that.
    ``ValueError`` for anything else: not JSON, text after the value, nested past the
    interpreter's depth (the caller checks the value's shape)."""
    try:
        value, at = _SCAN(text, 0)
    except (StopIteration, RecursionError):
        raise ValueError("not JSON") from None
    if at != len(text):
        raise ValueError("more than one JSON value")
    return value


def split_entry(body: bytes) -> tuple[list[Any], bytes, bytes, bytes]:
    """An entry's listing (decoded: the array ``LISTING`` names), its directories' stamps, its
    frontmatter and its file rows (the last three still JSON text; ``stamps_of`` decodes the
    first). ``ValueError`` for anything ``encode_loaded`` does not write."""
    return listing_at(body, 0, len(body))


def _tabs(window: bytes, start: int, end: int) -> tuple[int, int, int]:
    """Where the three tabs between an entry's four parts are; ``ValueError`` unless exactly three."""
    first = window.find(b"\t", start, end)
    second = window.find(b"\t", first + 1, end) if first >= 0 else -1
    third = window.find(b"\t", second + 1, end) if second >= 0 else -1
    if third < 0 or window.find(b"\t", third + 1, end) >= 0:
        raise ValueError("an entry is not four parts")
    return first, second, third


def listing_at(window: bytes, start: int, end: int) -> tuple[list[Any], bytes, bytes, bytes]:
    """``split_entry`` of the entry held by ``window[start:end]``, without copying it first (a
    build reads entries out of a window of the cache file, ``catalog.cache``)."""
    first, second, third = _tabs(window, start, end)
    listing = one_value(window[start:first].decode("utf-8"))
    if type(listing) is not list or len(listing) != len(LISTING):
        raise ValueError("an entry is not one JSON array of a listing's fields")
    return listing, window[first + 1 : second], window[second + 1 : third], window[third + 1 : end]


def stamps_of(text: bytes) -> list[Any]:
    """The directories' stamps an entry holds (``[rel, ino, size, mtime_ns, ctime_ns]`` each, as
    ``cache.stamps_hold`` reads them), from the part ``listing_at`` hands back; ``ValueError``
    when it is not a JSON array (``stamps_hold`` refuses a row of another shape)."""
    stamps = one_value(text.decode("utf-8"))
    if type(stamps) is not list:
        raise ValueError("the directories' stamps are not a JSON array")
    return stamps


def stamps_at(window: bytes, start: int, end: int) -> list[Any]:
    """``stamps_of`` the entry held by ``window[start:end]``, its listing left undecoded (what the
    scan helper checks, ``catalog.verdicts``)."""
    first, second, _third = _tabs(window, start, end)
    return stamps_of(window[first + 1 : second])


def _strs(values: Any) -> tuple[str, ...]:
    if type(values) is not list:
        raise TypeError("expected a list of strings")
    if not values:
        return ()
    for v in values:
        if type(v) is not str:
            raise TypeError("expected a list of strings")
    return tuple(values)


def _opt_str(value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise TypeError("expected a string")
    return value


def _decode_declaration(raw: Any) -> Declaration:
    run = []
    for script, interpreter, env, timeout, description in raw["run"]:
        if type(script) is not str or type(interpreter) is not str or type(timeout) is not int:
            raise TypeError("a run row has the wrong shape")
        run.append(ScriptDecl(script, interpreter, _strs(env), timeout, _opt_str(description)))
    fields = []
    for name, secret in raw["env"]:
        if type(name) is not str:
            raise TypeError("an env row has the wrong shape")
        fields.append(EnvField(name, bool(secret)))
    version = raw["version"]
    if type(version) is not int:
        raise TypeError("expected an integer")
    return Declaration(version, tuple(run), tuple(fields), _strs(raw["egress"]))


# ``Skill`` made field by field through its slots, as its ``__init__`` would make it (its
# ``__post_init__``'s two derived fields included, from text the decode already holds): a frozen
# dataclass's ``__init__`` sets each of its seventeen fields through ``object.__setattr__``, and
# its ``__post_init__`` formats the directory's ``Path`` back to text: about a third of a record's
# decode. ``test_codec_differential`` holds every field, derived ones included, to the records
# the constructor makes.
_SKILL_SLOTS = (
    "name",
    "directory",
    "found_at",
    "root",
    "frontmatter",
    "description",
    "files",
    "body_offset",
    "declaration",
    "missing_scripts",
    "skills_list_excluded",
    "pack",
    "phase",
    "tags",
    "path",
    "prefix",
    "uri_prefix",
)
if set(Skill.__slots__) != set(_SKILL_SLOTS):  # pragma: no cover - a field added to Skill and not here
    raise ImportError("catalog.codec does not make every field of Skill")
(
    _name,
    _directory,
    _found_at,
    _root,
    _frontmatter,
    _description,
    _files,
    _body_offset,
    _declaration_slot,
    _missing,
    _excluded,
    _pack,
    _phase,
    _tags,
    _path,
    _prefix,
    _uri_prefix,
) = (getattr(Skill, slot).__set__ for slot in _SKILL_SLOTS)
_new_skill = object.__new__
# ``Loaded`` the same way: five fields, made once per cached skill.
_LOADED_SLOTS = ("skill", "problems", "nested", "stamps", "stampable")
if set(Loaded.__slots__) != set(_LOADED_SLOTS):  # pragma: no cover - a field added to Loaded and not here
    raise ImportError("catalog.codec does not make every field of Loaded")
_loaded_skill, _loaded_problems, _loaded_nested, _loaded_stamps, _loaded_stampable = (
    getattr(Loaded, slot).__set__ for slot in _LOADED_SLOTS
)


def _decode_skill(
    raw: Any,
    frontmatter: bytes,
    rows: bytes,
    real: str,
    found_at: str,
    root: Path,
    root_real: str,
    skill_md: Stamp | None,
) -> Skill:
    # Every field is checked for the type ``_skill`` writes: the checksum guards against
    # damage, these against a row this code did not write.
    if type(raw) is not list:
        raise TypeError("a listing's skill is not an array")
    description, offset, count, declaration, missing, excluded, tags, phase, pack = raw
    if (
        type(description) is not str
        or type(offset) is not int
        or (phase is not None and type(phase) is not str)
        or (pack is not None and type(pack) is not str)
    ):
        raise TypeError("a listing field has the wrong type")
    files = CachedFiles(rows, count, skill_md=skill_md)
    decl = None if declaration is None else _decode_declaration(declaration)
    # ``_strs`` of each, inline: most skills declare no script and carry a few tags.
    if type(missing) is not list or type(tags) is not list:
        raise TypeError("expected a list of strings")
    missing_scripts = _strs(missing) if missing else ()
    rule = None if excluded is None else ExtensionRule(excluded)
    for tag in tags:
        if type(tag) is not str:
            raise TypeError("expected a list of strings")
    tag_values = tuple(tags)
    directory = path_under(root, root_real, real)
    name = real[real.rfind("/") + 1 :]  # ``directory.name``: a resolved path has no trailing slash
    skill = _new_skill(Skill)
    _name(skill, name)
    _directory(skill, directory)
    _found_at(skill, found_at)
    _root(skill, root)
    _frontmatter(skill, CachedFrontmatter(frontmatter, description))
    _description(skill, description)
    _files(skill, files)
    _body_offset(skill, offset)
    _declaration_slot(skill, decl)
    _missing(skill, missing_scripts)
    _excluded(skill, rule)
    _pack(skill, pack)
    _phase(skill, phase)
    _tags(skill, tag_values)
    _path(skill, "")
    # ``Skill.__post_init__``'s: ``str(directory)`` is ``real`` (a resolved path), and the URI
    # prefix is made from the name, as ``skill_path`` is the name while ``path`` is empty.
    _prefix(skill, real.rstrip("/") + "/")
    _uri_prefix(skill, f"skill://{uri_path(name)}/")
    return skill


def decode_loaded(
    listing: list[Any],
    frontmatter: bytes,
    rows: bytes,
    real: str,
    root: Path,
    root_real: str,
    *,
    skill_md: Stamp | None = None,
) -> Loaded:
    """The ``Loaded`` of ``real`` found under ``root`` (``root_real`` as text; the caller
    checked the entry is for both, and that its stamps hold), from the listing, frontmatter
    and rows ``split_entry`` hands back; ``skill_md``: the stamp of its SKILL.md the caller
    found holding (kept on the file records for the search index)."""
    found_at, _root_real, _skill_md, raw, problem_rows, nested = listing
    if type(found_at) is not str:
        raise TypeError("expected a string")
    problems: tuple[Problem, ...] = ()
    if problem_rows:
        made = []
        for path, reason, detail, level, skill, rule in problem_rows:
            if type(path) is not str or type(detail) is not str:
                raise TypeError("a problem row has the wrong shape")
            made.append(Problem(path, ProblemReason(reason), detail, Level(level), _opt_str(skill), _opt_str(rule)))
        problems = tuple(made)
    # No stamps: a reused entry is written back as the bytes it was read from (``catalog.cache``),
    # so nothing asks for them again.
    nested_paths: tuple[Path, ...] = ()
    if nested:
        for n in nested:
            if type(n) is not str:
                raise TypeError("expected a string")
        nested_paths = tuple(Path(n) for n in nested)
    loaded = _new_skill(Loaded)
    _loaded_skill(
        loaded,
        None if raw is None else _decode_skill(raw, frontmatter, rows, real, found_at, root, root_real, skill_md),
    )
    _loaded_problems(loaded, problems)
    _loaded_nested(loaded, nested_paths)
    _loaded_stamps(loaded, ())
    _loaded_stampable(loaded, True)
    return loaded
