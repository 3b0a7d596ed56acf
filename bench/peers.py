"""Ours beside the other skill servers: ready and the first full list answer, cold and warm.

    python -m bench.peers --setup                  # one venv per peer, pinned (PyPI; skillz from a checkout)
    python -m bench.peers --corpora public,1000,10000 --runs 3

Every peer runs in its own virtual environment under ``--peers-dir`` (default
``/tmp/skill-mcp-bench/peers/NAME``), made by ``--setup`` from the pins in :data:`PEERS`; no
peer's code is in this repository. skillz is not on the package index: ``--setup`` installs it
from an unpacked checkout (``--skillz-src``, default ``PEERS_DIR/src-skillz``, the commit in
:data:`SKILLZ_COMMIT`); without one it says so and skillz is reported as not set up.

Per corpus and repetition, each server is started through the SDK's stdio client and timed from
spawn to ``initialize`` → ``tools/list`` (*ready*) → its first full list answer, visiting ours
cold (an empty catalog cache), ours warm (a cache an earlier start filled) and every peer in
turn, rotating who goes first. What a "full list answer" is differs per server (:data:`PEERS`
says which tool and what it carries); none of the peers keeps anything between starts, so a
peer's one figure per repetition stands for its cold and its warm start alike (the operating
system's page cache is warm for every server: every corpus was read before). A peer that fails
on a corpus (no answer, an error result, a crash, a timeout) is reported as failed with its
error and not started again on that corpus.

The corpora: the public collections (``--public``, as ``bench.search_quality`` finds them,
merged into one directory because three of the peers take exactly one; on a name clash the
first collection's skill is kept) and the synthetic ``bench/corpus.py`` catalogs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from bench import corpus as corpora
from bench.firstanswer import cached_spec, walk
from bench.search_quality import PUBLIC_ROOTS
from bench.servers import CALL_TIMEOUT_S, ServerSpec, session
from bench.stats import Summary, ms, ratio, times

PEERS_DIR = Path("/tmp/skill-mcp-bench/peers")
STAMP = ".bench-peer"
SKILLZ_COMMIT = "7784a20"  # intellectronica/skillz, version 0.1.14
PUBLIC_STAMP = ".bench-public"


def _text(result: types.CallToolResult) -> str:
    if result.is_error:
        raise RuntimeError("error result: " + _first_text(result)[:300])
    return _first_text(result)


def _first_text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _skills_mcp(client: Any, skills: int) -> int:
    text = _text(await client.call_tool("skills_list", {}))
    return sum(1 for line in text.splitlines() if line.startswith("- "))


async def _agent_skill_search(client: Any, skills: int) -> int:
    # Its skill_list stops at ``limit`` (default 100): ask for all of them.
    text = _text(await client.call_tool("skill_list", {"limit": skills + 1000}))
    return len(json.loads(text))


async def _skill_mcp(client: Any, skills: int) -> int:
    text = _text(await client.call_tool("list_skills", {}))
    return sum(1 for line in text.splitlines() if line[:2] in ("✓ ", "✗ "))


async def _tools_pages(client: Any, first: types.ListToolsResult) -> int:
    """Every tool of a server whose listing *is* tools/list (one tool per skill)."""
    tools, cursor = len(first.tools), first.next_cursor
    while cursor:
        page = await client.list_tools(cursor=cursor)
        tools, cursor = tools + len(page.tools), page.next_cursor
    return tools


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    pins: tuple[str, ...]  # what --setup installs (pip requirement strings; "{src}" is skillz's checkout)
    python: tuple[int, int]  # the oldest interpreter it runs on
    source: str
    answer: str  # what its first full list answer is, in the report's words
    list_call: Callable[[Any, int], Awaitable[int]] | None  # None: tools/list is the listing

    def venv(self, peers_dir: Path) -> Path:
        return peers_dir / self.name

    def spec(self, peers_dir: Path, root: Path, label: str) -> ServerSpec:
        venv = self.venv(peers_dir)
        home = peers_dir / "homes" / f"{self.name}-{label}"  # what a peer writes under ~ stays here
        home.mkdir(parents=True, exist_ok=True)
        env = {"HOME": str(home)}
        if self.name == "skills-mcp":
            return ServerSpec(self.name, (str(venv / "bin" / "skills-mcp"),), {**env, "SKILLS_ROOT": str(root)})
        if self.name == "agent-skill-search":
            return ServerSpec(
                self.name, (str(venv / "bin" / "skill-search-mcp"),), {**env, "SKILL_CATALOG_DIRS": str(root)}
            )
        if self.name == "skill-mcp":  # serves ~/.skill-mcp/skills, nothing else
            link = home / ".skill-mcp" / "skills"
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink() if link.is_symlink() else shutil.rmtree(link)
            link.symlink_to(root, target_is_directory=True)
            return ServerSpec(self.name, (str(venv / "bin" / "skill-mcp-server"),), env)
        if self.name == "skillz":
            return ServerSpec(self.name, (str(venv / "bin" / "skillz"), str(root)), env)
        raise ValueError(self.name)


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer(
            "skills-mcp",
            ("skills-mcp==0.1.2", "mcp[cli]==1.27.0"),
            (3, 10),
            "PyPI skills-mcp 0.1.2 (mcp 1.27.0)",
            "`skills_list`: names and paths of the root's direct subdirectories with a SKILL.md (no description)",
            _skills_mcp,
        ),
        Peer(
            "agent-skill-search",
            ("agent-skill-search==0.4.0", "mcp==2.3.0"),
            (3, 10),
            "PyPI agent-skill-search 0.4.0 (mcp 2.3.0)",
            "`skill_list` with `limit` above the corpus size: name and description of every skill, from an "
            "in-memory SQLite FTS5 index built on the first call",
            _agent_skill_search,
        ),
        Peer(
            "skill-mcp",
            ("skill-mcp==0.1.1", "mcp==1.27.0"),
            (3, 10),
            "PyPI skill-mcp 0.1.1 (mcp 1.27.0)",
            "`list_skills`: name, description and path of each direct subdirectory of `~/.skill-mcp/skills` "
            "(a link to the corpus)",
            _skill_mcp,
        ),
        Peer(
            "skillz",
            ("{src}", "fastmcp==2.12.5", "mcp==1.16.0", "pydantic==2.12.3", "pydantic-core==2.41.4", "pyyaml==6.0.3"),
            (3, 12),
            f"intellectronica/skillz {SKILLZ_COMMIT} (0.1.14; fastmcp 2.12.5, mcp 1.16.0, pydantic 2.12.3 as its uv.lock pins)",
            "`tools/list` itself: it loads every skill before serving and registers one tool per skill, so its "
            "ready is its first full list answer",
            None,
        ),
    )
}


# ---- setup ------------------------------------------------------------------------------------


def find_python(oldest: tuple[int, int]) -> str | None:
    """An interpreter at least ``oldest``: this one, ``python3.X`` on PATH, or a pyenv version."""
    if sys.version_info[:2] >= oldest:
        return sys.executable
    candidates = [f"python3.{minor}" for minor in range(oldest[1], 16)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = [shutil.which(c) for c in candidates]
    found += [str(p) for p in sorted(pyenv.glob("3.*/bin/python3")) if pyenv.is_dir()]
    for exe in filter(None, found):
        try:
            out = subprocess.run(
                [exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            continue
        parts = out.stdout.split()
        if out.returncode == 0 and len(parts) == 2 and (int(parts[0]), int(parts[1])) >= oldest:
            return exe
    return None


def _stamp_text(peer: Peer) -> str:
    return json.dumps({"pins": peer.pins, "source": peer.source}, sort_keys=True)


def set_up(peer: Peer, peers_dir: Path) -> str | None:
    """Why ``peer`` cannot be measured (None: its venv is there, from these pins)."""
    stamp = peer.venv(peers_dir) / STAMP
    if not stamp.is_file():
        return "not set up (`python -m bench.peers --setup`)"
    if stamp.read_text(encoding="utf-8") != _stamp_text(peer):
        return "set up from other pins (`python -m bench.peers --setup` again)"
    return None


def setup(peer: Peer, peers_dir: Path, skillz_src: Path) -> str:
    venv = peer.venv(peers_dir)
    python = find_python(peer.python)
    if python is None:
        return f"{peer.name}: no Python {peer.python[0]}.{peer.python[1]} or later on this machine"
    pins = list(peer.pins)
    if "{src}" in pins:
        if not (skillz_src / "pyproject.toml").is_file():
            return (
                f"{peer.name}: no checkout at {skillz_src} (fetch github:intellectronica/skillz and unpack "
                f"commit {SKILLZ_COMMIT} there)"
            )
        pins[pins.index("{src}")] = str(skillz_src)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *pins], capture_output=True, text=True
    )
    if proc.returncode != 0:
        return f"{peer.name}: pip failed: {proc.stderr.strip().splitlines()[-1:]}"
    (venv / STAMP).write_text(_stamp_text(peer), encoding="utf-8")
    return f"{peer.name}: set up in {venv} ({peer.source}; {python})"


# ---- corpora ----------------------------------------------------------------------------------


def public_corpus(base: Path, into: Path) -> Path | None:
    """The public collections merged into one directory (copied once), or None if not unpacked."""
    roots = [base / r for r in PUBLIC_ROOTS]
    if not all(r.is_dir() for r in roots):
        return None
    key = json.dumps([str(r) for r in roots])
    stamp = into / PUBLIC_STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        return into
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for root in roots:
        for skill in sorted(root.iterdir()):
            if (skill / "SKILL.md").is_file() and not (into / skill.name).exists():
                shutil.copytree(skill, into / skill.name, symlinks=True)
    stamp.write_text(key, encoding="utf-8")
    return into


# ---- measurement ------------------------------------------------------------------------------


@dataclass(slots=True)
class ServerRuns:
    what: str
    ready: list[float] = field(default_factory=list)  # spawn -> tools/list
    answer: list[float] = field(default_factory=list)  # spawn -> the first full list answer
    entries: int = 0  # skills the answer listed
    error: str = ""  # why it failed ("" when it did not)
    skipped: str = ""  # why it was not started (its venv is absent: "not set up")


@dataclass(slots=True)
class PeerCorpus:
    label: str
    skills: int
    servers: dict[str, ServerRuns] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # kept for the report's verdicts
    skipped: list[str] = field(default_factory=list)  # peers not set up


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _timeout(skills: int) -> float:
    return max(CALL_TIMEOUT_S, skills * 0.01)


async def _ours(runs: ServerRuns, spec: ServerSpec, skills: int) -> None:
    async with session(spec, timeout_s=_timeout(skills)) as s:
        await s.client.list_tools()
        runs.ready.append(time.perf_counter() - s.spawned_at)
        runs.entries, _pages = await walk(s.client)
        runs.answer.append(time.perf_counter() - s.spawned_at)


async def _peer(runs: ServerRuns, peer: Peer, spec: ServerSpec, skills: int, errlog: Path) -> None:
    if runs.error:
        return
    try:
        async with session(spec, timeout_s=_timeout(skills), errlog_path=errlog) as s:
            first = await s.client.list_tools()
            ready = time.perf_counter() - s.spawned_at
            entries = await (
                _tools_pages(s.client, first) if peer.list_call is None else peer.list_call(s.client, skills)
            )
            answer = time.perf_counter() - s.spawned_at
            if peer.list_call is None:
                entries -= 1  # skillz's one tool that is not a skill: fetch_resource
    except Exception as err:  # any failure of a peer is a figure of the report, not a crash of it
        detail = _tail(errlog)
        runs.error = f"{type(err).__name__}: {str(err)[:200]}" + (f" (stderr: {detail})" if detail else "")
        return
    runs.ready.append(ready)
    runs.answer.append(answer)
    runs.entries = entries


async def measure(label: str, root: Path, runs: int, peers: Sequence[Peer], peers_dir: Path, skills: int) -> PeerCorpus:
    result = PeerCorpus(label, skills)
    cold, warm = (
        ServerRuns("`skill_list`, every page of 200 (name, description, problems)"),
        ServerRuns("`skill_list`, every page of 200 (name, description, problems)"),
    )
    result.servers["ours (cold)"], result.servers["ours (warm)"] = cold, warm
    logs = peers_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    visits: list[Callable[[], Awaitable[None]]] = []
    for peer in peers:
        entry = result.servers[peer.name] = ServerRuns(peer.answer)
        why = set_up(peer, peers_dir)
        if why is not None:
            entry.skipped = why
            continue
        errlog = logs / f"{peer.name}-{label}.log"
        errlog.unlink(missing_ok=True)
        visits.append(partial(_peer, entry, peer, peer.spec(peers_dir, root, label), skills, errlog))
    warm_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-warm-"))
    try:
        warm_spec = cached_spec(label, root, warm_dir)
        await _ours(ServerRuns(""), warm_spec, skills)  # the earlier start that fills the cache
        for rep in range(runs):
            cold_dir = Path(tempfile.mkdtemp(prefix="skill-mcp-bench-cold-"))
            order: list[Callable[[], Awaitable[None]]] = [
                partial(_ours, cold, cached_spec(label, root, cold_dir), skills),
                partial(_ours, warm, warm_spec, skills),
                *visits,
            ]
            shift = rep % len(order)
            for visit in order[shift:] + order[:shift]:
                await visit()
            shutil.rmtree(cold_dir, ignore_errors=True)
    finally:
        shutil.rmtree(warm_dir, ignore_errors=True)
    result.skills = cold.entries or skills
    result.failed = [name for name, r in result.servers.items() if r.error]
    result.skipped = [name for name, r in result.servers.items() if r.skipped]
    return result


def _med(values: Sequence[float]) -> float:
    return Summary.of(values).median if values else float("nan")


def rank(result: PeerCorpus, mode: str) -> list[tuple[str, float]]:
    """(server, median spawn -> first full list answer) of ours in ``mode`` and every peer that answered,
    fastest first."""
    rows = [(f"ours ({mode})", _med(result.servers[f"ours ({mode})"].answer))]
    rows += [(n, _med(r.answer)) for n, r in result.servers.items() if not n.startswith("ours") and r.answer]
    return sorted(rows, key=lambda row: row[1])


def _place(places: dict[str, list[str]], mode: str, name: str) -> str:
    return str(places[mode].index(name) + 1) if name in places[mode] else "–"


def table(results: Sequence[PeerCorpus]) -> list[str]:
    lines = [
        "| corpus | server | skills listed | ready (ms) | ready + first full list answer (ms) | ÷ ours warm "
        "| ÷ ours cold | place, warm / cold |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        warm = _med(r.servers["ours (warm)"].answer)
        cold = _med(r.servers["ours (cold)"].answer)
        places = {mode: [name for name, _ in rank(r, mode)] for mode in ("warm", "cold")}
        for name, runs in r.servers.items():
            if runs.skipped:
                lines.append(f"| {r.label} | {name} | | | {runs.skipped} | | | |")
                continue
            if runs.error and not runs.answer:
                lines.append(f"| {r.label} | {name} | | | **failed**: {runs.error} | | | |")
                continue
            answer = _med(runs.answer)
            lines.append(
                f"| {r.label} | {name} | {runs.entries} | {ms(_med(runs.ready))} | {ms(answer)} "
                f"| {times(ratio(answer, warm))} | {times(ratio(answer, cold))} "
                f"| {_place(places, 'warm', name)} / {_place(places, 'cold', name)} |"
            )
    return lines


def what_table(peers: Sequence[Peer]) -> list[str]:
    lines = [
        "| server | installed from | its first full list answer |",
        "|---|---|---|",
        "| ours | this tree | `skill_list`, every page of 200 (name, description, problems); cold: an empty "
        "catalog cache, warm: a cache an earlier start filled |",
    ]
    lines += [f"| {p.name} | {p.source} | {p.answer} |" for p in peers]
    return lines


def select(names: str) -> list[Peer]:
    if names in ("", "none"):
        return []
    if names == "all":
        return list(PEERS.values())
    unknown = [n for n in names.split(",") if n not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(PEERS)}")
    return [PEERS[n] for n in names.split(",")]


def corpus_roots(labels: Sequence[str], cache: Path, public: Path) -> list[tuple[str, Path | None, int]]:
    """(label, root or None when it is not there, skills) per corpus label (``public`` or a size)."""
    out: list[tuple[str, Path | None, int]] = []
    for label in labels:
        if label == "public":
            root = public_corpus(public, cache / "public-merged")
            count = sum(1 for p in root.iterdir() if (p / "SKILL.md").is_file()) if root else 0
            out.append((label, root, count))
        else:
            n = int(label)
            out.append((label, corpora.generate(cache / f"corpus-{n}", n).root, n))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--setup", action="store_true", help="make (or remake) every selected peer's venv, then exit")
    p.add_argument("--peers", default="all", help=f"comma-separated, of {', '.join(PEERS)} (default all)")
    p.add_argument("--peers-dir", type=Path, default=PEERS_DIR, help="where the peers' venvs are")
    p.add_argument(
        "--skillz-src", type=Path, default=None, help="skillz's unpacked checkout (default PEERS_DIR/src-skillz)"
    )
    p.add_argument("--corpora", default="public,1000,10000", help="'public' and/or sizes, comma-separated")
    p.add_argument("--runs", type=int, default=3, help="repetitions per corpus (default 3)")
    p.add_argument("--cache", type=Path, default=Path("/tmp/skill-mcp-bench"), help="where corpora are kept")
    p.add_argument(
        "--public",
        type=Path,
        default=Path(os.environ.get("SKILL_MCP_PUBLIC_SKILLS", "build/public-skills")),
        help="where the public collections are unpacked (as bench.search_quality)",
    )
    args = p.parse_args(argv)
    peers = select(args.peers)
    if args.setup:
        for peer in peers:
            print(setup(peer, args.peers_dir, args.skillz_src or args.peers_dir / "src-skillz"), file=sys.stderr)
        return 0
    results = []
    for label, root, skills in corpus_roots([c for c in args.corpora.split(",") if c], args.cache, args.public):
        if root is None:
            print(f"{label}: not unpacked under {args.public}; skipped", file=sys.stderr)
            continue
        print(f"peers at {label}: {args.runs} runs", file=sys.stderr)
        results.append(anyio.run(measure, label, root, args.runs, peers, args.peers_dir, skills))
    print("\n".join([*what_table(peers), "", *table(results)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
