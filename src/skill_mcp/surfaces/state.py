"""Per-server state shared by every surface, and the few catalog look-ups they all need."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skill_mcp.config import Settings
from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal
from skill_mcp.surfaces.answer_bytes import AnswerBytes, exchange_of
from skill_mcp.surfaces.registry import ScriptStates

# The file readers (catalog.files, and the catalog records behind them) are imported by the
# functions that read: building a server imports this module, and must not import those
# before the first request that reads (start-up stays independent of the number of skills).
if TYPE_CHECKING:  # pragma: no cover - typing only
    from skill_mcp.catalog import files as catfiles
    from skill_mcp.models import Catalog, Skill, SkillFile

SKILL_MD = "SKILL.md"


@dataclass(frozen=True, slots=True)
class SurfaceState:
    settings: Settings
    catalog_provider: Callable[[], Catalog] = field(repr=False)
    memo: catfiles.DigestMemo = field(repr=False)
    scripts: ScriptStates
    # The runner's store of run outputs, or None before any runner exists (runner.output_store).
    run_outputs: Callable[[], Any] = field(default=lambda: None, repr=False)
    # The file content the answers in progress hold, bounded server-wide (surfaces.answer_bytes).
    answers: AnswerBytes = field(default_factory=AnswerBytes, repr=False)

    def catalog(self) -> Catalog:
        return self.catalog_provider()

    def refresh(self, catalog: Catalog, skills: Sequence[Skill]) -> Catalog:
        """``catalog`` with ``skills`` read from disk again (their file tier failed): through the
        provider, which swaps the result in for every later request, or built aside for a
        provider that cannot (``catalog.filetier.rebuilt``)."""
        refresh = getattr(self.catalog_provider, "refresh", None)
        if refresh is not None:
            result: Catalog = refresh(catalog, skills)
            return result
        from skill_mcp.catalog.filetier import rebuilt

        return rebuilt(self.settings, catalog, skills)


Refresh = Callable[["Catalog", Sequence["Skill"]], "Catalog"]
# How many times one answer reloads skills whose files changed before it gives up (each reload
# makes those records fresh, so a second round finds only files that changed meanwhile).
MAX_REFRESHES = 4


async def files_checked(catalog: Catalog, pick: Callable[[Catalog], Iterable[Skill]], refresh: Refresh) -> Catalog:
    """The catalog in which every skill ``pick(catalog)`` names has its file tier checked
    (``catalog.filetier``): the answer that then carries file facts of those skills takes them
    from checked records only. A skill whose files changed since its cache entry was written is
    read from disk again (``refresh``, in a worker thread) and the pick is made again from the
    new catalog. ``pick`` raises the answer's own refusal (an unknown skill, say)."""
    from skill_mcp.catalog.filetier import stale

    for _ in range(MAX_REFRESHES):
        changed = stale(pick(catalog))
        if not changed:
            return catalog
        import anyio  # here, not at the top: surfaces.stdio.early imports this module without the SDK

        catalog = await anyio.to_thread.run_sync(refresh, catalog, changed)
    raise SkillMcpError(
        Refusal.FILE_CHANGED, "the skill's files kept changing while this answer was made; ask again", {}
    )


# A near name is one difflib finds this alike (a typo: ``pfd`` for ``pdf``), or one sharing a
# hyphenated word of at least ``MIN_WORD`` letters: a shared "a" or "to" says nothing.
CLOSE_CUTOFF = 0.6
MIN_WORD = 3


def closest_names(names: Iterable[str], wanted: str, limit: int = 3) -> list[str]:
    """Served names that ``wanted`` (a guessed or remembered name such as ``stdout-purity-check``,
    or a typo such as ``pfd``) may have meant, most alike first; none when nothing is alike.

    Candidates are the 20 names sharing most words of ``MIN_WORD`` letters or more with it, and
    the names ``difflib.get_close_matches`` finds at ``CLOSE_CUTOFF``; they are ordered by
    difflib's similarity. The word pass is small set intersections; difflib's own filters
    (``real_quick_ratio``, ``quick_ratio``) keep its pass cheap on a miss at 10,000 skills.
    """
    from difflib import SequenceMatcher, get_close_matches

    pool = list(names)
    key = wanted.lower()
    words = {w for w in key.split("-") if len(w) >= MIN_WORD}
    overlap = heapq.nsmallest(20, ((-len(words.intersection(n.split("-"))), n) for n in pool))
    candidates = {n for score, n in overlap if score < 0}
    candidates.update(get_close_matches(key, pool, n=limit, cutoff=CLOSE_CUTOFF))
    return sorted(candidates, key=lambda n: (-SequenceMatcher(None, key, n).ratio(), n))[:limit]


def find_skill(catalog: Catalog, name: str) -> Skill:
    skill = catalog.skills.get(name)
    if skill is None:
        closest = closest_names(catalog.names(), name)
        hint = f" (closest: {', '.join(closest)})" if closest else ""
        raise SkillMcpError(
            Refusal.UNKNOWN_SKILL,
            f"no skill named {name!r} is served{hint}; call skill_list",
            {"name": name, "closest": closest},
        )
    return skill


def listed_in_skills_ext(skill: Skill) -> bool:
    """SEP-2640 entries must be name-consistent and within limits; the catalog decides."""
    return skill.skills_list_excluded is None


def file_record(
    memo: catfiles.DigestMemo, skill: Skill, f: SkillFile, *, known_only: bool = False
) -> dict[str, Any] | None:
    """``{path, uri, size, digest}`` for one served file, digest never stale.

    With ``known_only`` nothing is read or hashed: None when the digest is not already known
    for the file as it is now.
    """
    import skill_mcp.catalog.files as catfiles

    info = catfiles.known_info(memo, skill, f) if known_only else catfiles.file_info(memo, skill, f)
    if info is None:
        return None
    return {"path": f.rel, "uri": skill.uri_prefix + f.uri_path, "size": info.size, "digest": info.digest}


# Reading this much from the page cache costs less than a hop to a worker thread and back
# (figures in bench/README.md, "Figures behind design choices"), so a read this small is done on
# the event loop and anything larger (or any hashing) in a worker.
INLINE_READ_BYTES = 256 * 1024


async def hold_answer_bytes(answers: AnswerBytes | None, nbytes: int, request: Any) -> None:
    """Reserve the file content a large answer will hold before it opens anything, until the
    answer has left (``surfaces.answer_bytes``; ``request`` is the SDK's request context, whose
    HTTP exchange owns the bytes); an answer of at most ``INLINE_READ_BYTES`` reserves nothing."""
    if answers is not None and nbytes > INLINE_READ_BYTES:
        await answers.hold(nbytes, exchange_of(request))
