"""A BM25F index over skills: posting lists with precomputed per-document contributions.

Why this shape: a query must stay well under 5 ms at 10,000 skills, in pure Python, and the
index must not hold body text. So everything that depends only on the corpus is computed at
build time. For a term t and a skill d, BM25F combines the per-field frequencies into one
pseudo-frequency

    tf~(t, d) = sum_f  w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avglen_f)

and the term's score in d is ``idf(t) * tf~ / (k1 + tf~)``. Both depend only on the corpus,
so each posting stores that final number; a query just adds up the postings of its terms
(times the query weight of each term) and keeps the best ``limit``. Ties are broken by name
so the same query over the same corpus always gives the same order.

Beside each posting we keep a one-byte mask of the fields the term occurs in and the index
of the heading the term first appears under in the body, so a hit can say why it matched
without keeping the body: only headings (short) are kept.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from skill_mcp.search.text import query_terms, terms


class Field(IntEnum):
    NAME = 0  # the directory name (the served name)
    TITLE = 1  # frontmatter name, when it differs from the directory name
    DESCRIPTION = 2
    TAGS = 3  # tags, phase and metadata values
    HEADINGS = 4
    BODY = 5


FIELD_LABELS = ("name", "frontmatter name", "description", "tags", "heading", "body")

# Field weights and length normalisation. Short, curated fields (name, tags) say most about
# what a skill is for; the body says most about how, and is long, so it is normalised hardest.
WEIGHTS = (4.0, 3.0, 3.0, 2.5, 1.5, 1.0)
B = (0.3, 0.3, 0.6, 0.5, 0.6, 0.75)
K1 = 1.2
# A name is a curated identifier: a query word that is one of a skill's name words is strong
# evidence even when the word is common in descriptions ("skill" in skill-creator). So name
# matches also earn NAME_BOOST times the word's rarity among names alone.
NAME_BOOST = 0.6
NO_SECTION = 0xFFFF


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """What the index reads from one skill. The body is read once at build time, then dropped."""

    name: str
    title: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    body: str = ""


@dataclass(frozen=True, slots=True)
class Hit:
    name: str
    score: float
    fields: tuple[str, ...]  # labels of the fields any query term matched in, in field order
    matched: tuple[str, ...]  # the words the person typed that matched (aliases name their source)
    section: str | None  # the heading of the body section that matched first, if any

    @property
    def reason(self) -> str:
        text = f"matched {', '.join(self.matched)} in {', '.join(self.fields)}"
        if self.section:
            text += f" (section '{self.section}')"
        return text


@dataclass(frozen=True, slots=True)
class _Postings:
    docs: array  # sorted doc ids ('I')
    scores: array  # idf * tf~/(k1+tf~) per doc ('f')
    masks: bytes  # bit i set: the term occurs in Field(i)
    sections: array  # heading index of the first body occurrence, or NO_SECTION ('H')


@dataclass(frozen=True, slots=True)
class SearchIndex:
    names: tuple[str, ...]  # doc id -> skill name, sorted, so doc id order is name order
    headings: tuple[tuple[str, ...], ...]
    postings: Mapping[str, _Postings]

    def __len__(self) -> int:
        return len(self.names)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """Rank skills for ``query``; at most ``limit`` hits, best first, ties by name."""
        if limit <= 0:
            return []
        qterms = query_terms(query)
        acc: dict[int, float] = {}
        get = acc.get
        for term in sorted(qterms):  # fixed order: float sums come out identical every run
            post = self.postings.get(term)
            if post is None:
                continue
            weight = qterms[term][0]
            for doc, score in zip(post.docs, post.scores, strict=True):
                acc[doc] = get(doc, 0.0) + weight * score
        # Rounded before comparing so that scores equal up to float noise tie, and then the
        # lower doc id (the earlier name) wins.
        best = heapq.nsmallest(limit, acc.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
        return [self._hit(doc, score, qterms) for doc, score in best]

    def _hit(self, doc: int, score: float, qterms: Mapping[str, tuple[float, str]]) -> Hit:
        mask = 0
        matched: list[str] = []
        votes: Counter[int] = Counter()
        for term in sorted(qterms):
            post = self.postings.get(term)
            if post is None:
                continue
            i = bisect_left(post.docs, doc)
            if i == len(post.docs) or post.docs[i] != doc:
                continue
            mask |= post.masks[i]
            typed = qterms[term][1]
            if typed not in matched:
                matched.append(typed)
            if post.sections[i] != NO_SECTION:
                votes[post.sections[i]] += 1
        labels = tuple(FIELD_LABELS[f] for f in Field if mask & (1 << f))
        heads = self.headings[doc]
        # The section most query words point at; the earlier one on a tie.
        section = min(votes, key=lambda s: (-votes[s], s)) if votes else NO_SECTION
        return Hit(
            name=self.names[doc],
            score=round(score, 6),
            fields=labels,
            matched=tuple(matched),
            section=heads[section] if section < len(heads) else None,
        )


def split_markdown(body: str) -> tuple[list[str], list[tuple[int, str]]]:
    """Headings of a Markdown body, and its text lines tagged with the heading they sit under.

    Lines inside fenced code blocks are text, never headings (``# comment`` in a shell block).
    """
    headings: list[str] = []
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
            continue
        if fence is None and stripped.startswith("#"):
            title = stripped.lstrip("#").strip()
            if title and len(stripped) - len(stripped.lstrip("#")) <= 6:
                headings.append(title[:120])
                continue
        lines.append((len(headings) - 1 if headings else NO_SECTION, line))
    return headings, lines


def _doc_fields(doc: SearchDoc) -> tuple[list[Counter[str]], dict[str, int], list[str]]:
    """Per-field term counts, the first body section of each term, and the headings."""
    name_terms = list(terms(doc.name))
    title_terms = list(terms(doc.title))
    if sorted(set(title_terms)) == sorted(set(name_terms)):
        title_terms = []  # the usual case: counting the same words twice would double the name
    headings, lines = split_markdown(doc.body)
    # A term's section is the first heading that names it, else the first section whose
    # text holds it: that is the passage a person would be pointed to.
    first_section: dict[str, int] = {}
    for i, h in enumerate(headings):
        for t in terms(h):
            first_section.setdefault(t, i)
    body: Counter[str] = Counter()
    for section, line in lines:
        for t in terms(line):
            body[t] += 1
            first_section.setdefault(t, section)
    counts = [
        Counter(name_terms),
        Counter(title_terms),
        Counter(terms(doc.description)),
        Counter(t for tag in doc.tags for t in terms(tag)),
        Counter(t for h in headings for t in terms(h)),
        body,
    ]
    return counts, first_section, headings


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def build_index(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index. Each doc's body is consumed here and not retained."""
    ordered = sorted(docs, key=lambda d: d.name)
    n_fields = len(Field)
    per_doc: list[tuple[list[Counter[str]], dict[str, int]]] = []
    all_headings: list[tuple[str, ...]] = []
    totals = [0] * n_fields
    for doc in ordered:
        counts, first_section, headings = _doc_fields(doc)
        per_doc.append((counts, first_section))
        all_headings.append(tuple(headings))
        for f in range(n_fields):
            totals[f] += sum(counts[f].values())
    n = max(len(ordered), 1)
    avg = [max(t / n, 1.0) for t in totals]
    raw: dict[str, list[tuple[int, float, int, int]]] = {}
    for doc_id, (counts, first_section) in enumerate(per_doc):
        lens = [sum(c.values()) for c in counts]
        pseudo: dict[str, float] = {}
        masks: dict[str, int] = {}
        for f in range(n_fields):
            norm = 1.0 - B[f] + B[f] * lens[f] / avg[f]
            for t, tf in counts[f].items():
                pseudo[t] = pseudo.get(t, 0.0) + WEIGHTS[f] * tf / norm
                masks[t] = masks.get(t, 0) | (1 << f)
        for t, tf_tilde in pseudo.items():
            raw.setdefault(t, []).append(
                (doc_id, tf_tilde / (K1 + tf_tilde), masks[t], first_section.get(t, NO_SECTION))
            )
    name_bits = (1 << Field.NAME) | (1 << Field.TITLE)
    postings: dict[str, _Postings] = {}
    for t, rows in raw.items():
        idf = _idf(len(ordered), len(rows))
        in_names = sum(1 for r in rows if r[2] & name_bits)
        boost = NAME_BOOST * _idf(len(ordered), in_names) if in_names else 0.0
        postings[t] = _Postings(
            docs=array("I", (r[0] for r in rows)),
            scores=array("f", (idf * r[1] + (boost if r[2] & name_bits else 0.0) for r in rows)),
            masks=bytes(r[2] for r in rows),
            sections=array("H", (min(r[3], NO_SECTION) for r in rows)),
        )
    return SearchIndex(names=tuple(d.name for d in ordered), headings=tuple(all_headings), postings=postings)
