"""A deterministic synthetic skill corpus for the benchmark.

``generate(root, n)`` writes ``n`` skills under ``root``: SKILL.md of 2-20 KB (YAML
frontmatter with name, description and metadata, then Markdown), one to ten bundled files
each (references, some nested one or two levels deep, a JSON asset), one skill in five with a
declared no-op script (python, bash or node, in turn), and one skill in fifty nested inside
its predecessor (published flat, as the Skills extension says). The same ``n`` and seed
always give the same bytes, so two runs measure the same work. A finished corpus carries a
stamp file and is reused, not rewritten.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

SEED = 20261130
VERSION = "3"  # bump when the shape below changes; the stamp then forces a rebuild
STAMP = ".bench-corpus"

WORDS = [
    "analyze",
    "api",
    "archive",
    "audit",
    "backup",
    "batch",
    "benchmark",
    "branch",
    "browser",
    "build",
    "cache",
    "calendar",
    "certificate",
    "changelog",
    "chart",
    "checklist",
    "cli",
    "client",
    "cloud",
    "cluster",
    "commit",
    "compile",
    "compliance",
    "config",
    "container",
    "contract",
    "convert",
    "cost",
    "coverage",
    "cron",
    "csv",
    "dashboard",
    "data",
    "database",
    "debug",
    "deploy",
    "design",
    "diagram",
    "diff",
    "dns",
    "docker",
    "document",
    "domain",
    "draft",
    "email",
    "encrypt",
    "endpoint",
    "error",
    "estimate",
    "event",
    "excel",
    "export",
    "feature",
    "feedback",
    "file",
    "filter",
    "finance",
    "firewall",
    "font",
    "form",
    "format",
    "git",
    "grammar",
    "graph",
    "grant",
    "helm",
    "html",
    "image",
    "import",
    "incident",
    "index",
    "invoice",
    "issue",
    "java",
    "json",
    "kubernetes",
    "label",
    "latency",
    "layout",
    "lint",
    "log",
    "markdown",
    "meeting",
    "memory",
    "merge",
    "metric",
    "migrate",
    "mock",
    "model",
    "monitor",
    "network",
    "note",
    "notebook",
    "onboarding",
    "package",
    "page",
    "parse",
    "patch",
    "payment",
    "pdf",
    "performance",
    "pipeline",
    "plan",
    "plot",
    "policy",
    "postgres",
    "presentation",
    "privacy",
    "profile",
    "prompt",
    "proxy",
    "python",
    "query",
    "queue",
    "react",
    "readme",
    "recipe",
    "refactor",
    "regex",
    "release",
    "report",
    "request",
    "resume",
    "review",
    "risk",
    "roadmap",
    "route",
    "rust",
    "schema",
    "scrape",
    "script",
    "search",
    "secret",
    "security",
    "server",
    "service",
    "sheet",
    "shell",
    "slack",
    "slide",
    "spec",
    "sql",
    "ssh",
    "sprint",
    "storage",
    "style",
    "summary",
    "survey",
    "table",
    "task",
    "template",
    "terraform",
    "test",
    "ticket",
    "timeline",
    "token",
    "trace",
    "translate",
    "tutorial",
    "typescript",
    "upload",
    "user",
    "validate",
    "vector",
    "video",
    "webhook",
    "wiki",
    "workflow",
    "yaml",
    "zip",
]
VERBS = (
    "create",
    "review",
    "convert",
    "summarize",
    "check",
    "write",
    "fix",
    "plan",
    "explain",
    "extract",
    "compare",
    "generate",
    "format",
    "migrate",
    "test",
    "audit",
)
NO_OP = {"python": ("scripts/noop.py", "pass\n"), "bash": ("scripts/noop.sh", ":\n"), "node": ("scripts/noop.js", "\n")}
INTERPRETERS = ("python", "bash", "node")


@dataclass(frozen=True, slots=True)
class CorpusInfo:
    root: Path
    n: int
    files: int
    bytes: int
    scripts: dict[str, str]  # interpreter -> "skill-name:script" of one declared no-op script
    sample: tuple[str, ...]  # skill names spread over the catalog, each with 8+ files
    queries: tuple[str, ...]


FUNCTION_WORDS = [
    "the",
    "a",
    "to",
    "and",
    "of",
    "for",
    "with",
    "when",
    "use",
    "this",
    "that",
    "is",
    "in",
    "on",
    "it",
    "be",
    "by",
    "or",
    "if",
    "then",
    "each",
    "your",
    "from",
    "as",
    "not",
    "all",
    "any",
    "only",
    "before",
    "after",
    "first",
    "next",
    "file",
    "step",
    "run",
    "check",
]


def _vocabulary() -> tuple[list[str], list[float]]:
    """Body text follows Zipf's law over a large vocabulary, like prose does.

    A body drawn uniformly from the few domain words would put every word in every skill,
    which no real catalog does and which would make every search term's posting list the
    whole catalog. So: function words first, then 6,000 made-up words, weights 1/rank; the
    domain words (what descriptions and queries use) are mixed in separately, sparsely.
    """
    rng = random.Random(SEED)
    onsets, vowels, codas = (
        [
            "b",
            "c",
            "d",
            "f",
            "g",
            "h",
            "k",
            "l",
            "m",
            "n",
            "p",
            "r",
            "s",
            "t",
            "v",
            "w",
            "z",
            "br",
            "cl",
            "dr",
            "fl",
            "gr",
            "pl",
            "st",
            "tr",
        ],
        "aeiou",
        "nrstlmk",
    )
    made: list[str] = []
    seen = set(FUNCTION_WORDS) | set(WORDS)
    while len(made) < 6000:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 3)))
        word += rng.choice(codas) if rng.random() < 0.5 else ""
        if word not in seen:
            seen.add(word)
            made.append(word)
    vocab = [*FUNCTION_WORDS, *made]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    return vocab, list(itertools.accumulate(weights))


VOCAB, CUM_WEIGHTS = _vocabulary()


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    count = rng.randint(lo, hi)
    words = rng.choices(VOCAB, cum_weights=CUM_WEIGHTS, k=count)
    if rng.random() < 0.3:  # now and then a domain word, as prose about a task would have
        words[rng.randrange(count)] = rng.choice(WORDS)
    return " ".join(words).capitalize() + "."


def _paragraphs(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    section = 0
    while length < size:
        if section == 0 or rng.random() < 0.15:
            section += 1
            line = f"\n## {rng.choice(VERBS).capitalize()} the {rng.choice(WORDS)} {rng.choice(WORDS)}\n"
        elif rng.random() < 0.2:
            line = "".join(f"- {_sentence(rng, 4, 10)}\n" for _ in range(rng.randint(2, 5)))
        else:
            line = " ".join(_sentence(rng, 6, 18) for _ in range(rng.randint(2, 6))) + "\n"
        out.append(line + "\n")
        length += len(line) + 1
    return "".join(out)


def _name(i: int, rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}-{rng.choice(WORDS)}-{i:05d}"


def _skill_md(rng: random.Random, name: str, script: tuple[str, str] | None) -> str:
    topic = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
    description = (
        f"{rng.choice(VERBS).capitalize()} {topic} for a {rng.choice(WORDS)} project. "
        f"Use when the user asks to {rng.choice(VERBS)} {rng.choice(WORDS)} or {rng.choice(WORDS)} "
        f"{rng.choice(WORDS)}. {' '.join(rng.sample(WORDS, 6)).capitalize()}."
    )
    tags = ", ".join(rng.sample(WORDS, 3))
    head = [
        f"name: {name}",
        f"description: {json.dumps(description)}",
        "license: MIT",
        "metadata:",
        '  author: "bench"',
        '  version: "1.0"',
        f'  tags: "{tags}"',
    ]
    if script is not None:
        head += [
            "mcp-host:",
            "  version: 1",
            "  run:",
            f"    - script: {script[0]}",
            f"      interpreter: {script[1]}",
            "      description: does nothing, quickly",
        ]
    size = rng.randint(2 * 1024, 20 * 1024)
    front = "---\n" + "\n".join(head) + "\n---\n"
    body = f"# {name}\n\nRead references/guide.md first.\n" + _paragraphs(rng, size - len(front) - 64)
    return front + body[: max(0, size - len(front))]


def _write(path: Path, text: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(data)
    return len(data)


def _spec_hash(n: int) -> str:
    return hashlib.sha256(f"{VERSION}:{SEED}:{n}".encode()).hexdigest()[:16]


def generate(root: Path, n: int) -> CorpusInfo:
    """Write (or reuse) the corpus of ``n`` skills under ``root``; return what the harness needs."""
    rng = random.Random(SEED * 100_003 + n)
    stamp = root / STAMP
    fresh = not (stamp.is_file() and stamp.read_text(encoding="utf-8").startswith(_spec_hash(n)))
    if fresh and root.exists():
        shutil.rmtree(root)
    files = total = 0
    scripts: dict[str, str] = {}
    names: list[str] = []
    parent_dir: Path | None = None
    for i in range(n):
        name = _name(i, rng)
        names.append(name)
        nested = i % 50 == 49 and parent_dir is not None
        where = (parent_dir / "extras" / name) if nested and parent_dir else root / name
        script = None
        if i % 5 == 2:
            interp = INTERPRETERS[(i // 5) % 3]
            script = (NO_OP[interp][0], interp)
            scripts.setdefault(interp, f"{name}:{script[0]}")
        text = {
            "SKILL.md": _skill_md(rng, name, script),
            "references/guide.md": "# Guide\n\n" + _paragraphs(rng, rng.randint(1024, 8 * 1024)),
        }
        if i % 3 == 0:
            text["references/deep/notes.md"] = _paragraphs(rng, rng.randint(512, 4096))
        if i % 7 == 0:
            text["references/deep/deeper/table.md"] = _paragraphs(rng, rng.randint(256, 2048))
        if i % 10 == 0:  # enough files for an eight-path skill_file batch
            for part in range(1, 7):
                text[f"references/part-{part}.md"] = _paragraphs(rng, rng.randint(256, 2048))
        if i % 2 == 1:
            text["assets/data.json"] = json.dumps({"id": i, "words": rng.sample(WORDS, 8)}, indent=1) + "\n"
        if script is not None:
            text[script[0]] = NO_OP[script[1]][1]
        files += len(text)
        if fresh:
            total += sum(_write(where / rel, body) for rel, body in text.items())
        else:
            total += sum(len(body.encode("utf-8")) for body in text.values())
        if not nested:
            parent_dir = where
    if fresh:
        stamp.write_text(f"{_spec_hash(n)}\n", encoding="utf-8")
    # Sampled skills are every tenth one, so each has the eight-plus files a batch read needs.
    step = max(10, n // 8 // 10 * 10)
    sample = tuple(names[i] for i in range(0, n, step))[:8]
    return CorpusInfo(root, n, files, total, scripts, sample, queries())


def queries() -> tuple[str, ...]:
    """The search queries the benchmark sends (the same for every corpus size)."""
    qrng = random.Random(SEED)
    return tuple(f"{qrng.choice(VERBS)} {qrng.choice(WORDS)} {qrng.choice(WORDS)}" for _ in range(16))


def stamped(root: Path, n: int) -> bool:
    """True when ``root`` holds a finished corpus of ``n`` skills (its stamp matches)."""
    stamp = root / STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8").startswith(_spec_hash(n))
