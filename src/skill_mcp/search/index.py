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
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from skill_mcp.search.text import query_terms


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
_EPSILON = 1e-6  # margin for float noise when pruning (scores compare at 9 decimals)


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
    docs: array[int]  # sorted doc ids ('I')
    scores: array[float]  # idf * tf~/(k1+tf~) per doc ('f')
    masks: bytes  # bit i set: the term occurs in Field(i)
    sections: array[int]  # heading index of the first body occurrence, or NO_SECTION ('H')
    top: float  # the largest score in ``scores``: this term's upper bound, for pruning


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
        acc = self._accumulate(qterms, limit)
        # Rounded before comparing so that scores equal up to float noise tie, and then the
        # lower doc id (the earlier name) wins.
        best = heapq.nsmallest(limit, acc.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
        return [self._hit(doc, score, qterms) for doc, score in best]

    def _accumulate(self, qterms: Mapping[str, tuple[float, str]], limit: int) -> dict[int, float]:
        """Term-at-a-time scoring with MaxScore-style pruning.

        Terms go in order of their best possible contribution. Once the ``limit``-th best
        score so far beats everything the remaining terms could still add, no new skill can
        enter the result: the remaining terms are then only looked up for the candidates
        still in reach, by binary search, instead of scanning their postings. The result is
        exactly the exhaustive one; the order of terms is fixed, so float sums repeat.
        """
        present = [(t, qterms[t][0], p) for t in sorted(qterms) if (p := self.postings.get(t)) is not None]
        present.sort(key=lambda x: (-x[1] * x[2].top, x[0]))
        rest = sum(w * p.top for _, w, p in present)
        acc: dict[int, float] = {}
        pruned = False
        for _term, weight, post in present:
            rest -= weight * post.top
            if not pruned:
                get = acc.get
                for doc, score in zip(post.docs, post.scores, strict=True):
                    acc[doc] = get(doc, 0.0) + weight * score
            elif len(acc) * 8 < len(post.docs):
                docs, n = post.docs, len(post.docs)
                for doc in acc:
                    i = bisect_left(docs, doc)
                    if i < n and docs[i] == doc:
                        acc[doc] += weight * post.scores[i]
            else:
                for doc, score in zip(post.docs, post.scores, strict=True):
                    if doc in acc:
                        acc[doc] += weight * score
            if len(acc) >= limit:
                theta = heapq.nlargest(limit, acc.values())[-1]
                if rest + _EPSILON < theta:
                    pruned = True
                    acc = {d: s for d, s in acc.items() if s + rest + _EPSILON >= theta}
        return acc

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


def split_markdown(body: str) -> tuple[list[str], list[str]]:
    """Headings of a Markdown body, and the text of each section.

    ``sections[0]`` is the text before the first heading; ``sections[i + 1]`` the text under
    ``headings[i]``. Lines inside fenced code blocks are text, never headings (``# comment``
    in a shell block).
    """
    headings: list[str] = []
    sections: list[list[str]] = [[]]
    fence: str | None = None
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None and stripped.startswith("#"):
            level = len(stripped) - len(stripped.lstrip("#"))
            title = stripped.lstrip("#").strip()
            if title and level <= 6:
                headings.append(title[:120])
                sections.append([])
                continue
        sections[-1].append(line)
    return headings, ["\n".join(lines) for lines in sections]


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
