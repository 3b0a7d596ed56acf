"""A BM25F index over skills: posting lists with precomputed per-document contributions.

Why this shape: a query must cost a few hundred microseconds at 10,000 skills, in pure
Python, and the index must not hold body text. So everything that depends only on the corpus is computed at
build time. For a term t and a skill d, BM25F combines the per-field frequencies into one
pseudo-frequency

    tf~(t, d) = sum_f  w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avglen_f)

and the term's score in d is ``idf(t) * tf~ / (k1 + tf~)``. Both depend only on the corpus,
so each posting stores that final number; a query adds up the postings of its terms (times
the query weight of each term) and keeps the best ``limit``. Ties are broken by name so the
same query over the same corpus always gives the same order. ``topk`` finds the best
``limit`` without adding up every posting: beside each long list the index keeps its best
postings in score order (``postings.Impact``), and a query over long lists reads those.

Beside each posting we keep a one-byte mask of the fields the term occurs in and the index
of the heading the term first appears under in the body, so a hit can say why it matched
without keeping the body: only headings (short) are kept.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from skill_mcp.search.postings import _Postings
from skill_mcp.search.text import QueryTerm, query_terms
from skill_mcp.search.topk import exhaustive, threshold


class Field(IntEnum):
    NAME = 0  # the directory name (the served name)
    TITLE = 1  # frontmatter name, when it differs from the directory name
    DESCRIPTION = 2
    TAGS = 3  # tags, phase and metadata values
    HEADINGS = 4
    BODY = 5


FIELD_LABELS = ("name", "frontmatter name", "description", "tags", "heading", "body")
# Field mask -> the labels of its fields, in field order (derived once from the table above).
_LABELS = tuple(
    tuple(label for f, label in enumerate(FIELD_LABELS) if mask & (1 << f)) for mask in range(1 << len(FIELD_LABELS))
)

# Field weights and length normalisation. Short, curated fields (name, tags) say most about
# what a skill is for; the body says most about how, and is long, so it is normalised hardest.
WEIGHTS = (4.0, 3.0, 3.0, 2.5, 1.5, 1.0)
B = (0.3, 0.3, 0.6, 0.5, 0.6, 0.75)
K1 = 1.2
# The body's pseudo-frequency is capped: a long reference repeats every common word, and
# without a cap its body alone could earn a term's whole IDF, as much as a name or a
# description match. Capped, a body-only match earns at most BODY_CAP / (K1 + BODY_CAP) of it.
BODY_CAP = 2.0
# A name is a curated identifier: a query word that is one of a skill's name words is strong
# evidence even when the word is common in descriptions ("skill" in skill-creator). So name
# matches also earn NAME_BOOST times the word's rarity among names alone.
NAME_BOOST = 0.3
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
    matched: tuple[str, ...]  # the words that matched: a typed word, or a word related to one
    section: str | None  # the heading of the body section that matched first, if any
    # Per matched term, in term order: how it matched (``QueryTerm.label``) and the fields that
    # term occurs in. The reason says exactly this, so it never claims a word a field lacks.
    why: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def reason(self) -> str:
        text = "matched " + "; ".join(f"{label} in {', '.join(fields)}" for label, fields in self.why)
        if self.section:
            text += f" (section '{self.section}')"
        return text


@dataclass(frozen=True, slots=True)
class SearchIndex:
    names: tuple[str, ...]  # doc id -> skill name, sorted, so doc id order is name order
    headings: Sequence[tuple[str, ...]]  # doc id -> its headings (a tuple, or read lazily from a file)
    postings: Mapping[str, _Postings]

    def __len__(self) -> int:
        return len(self.names)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """Rank skills for ``query``; at most ``limit`` hits, best first, ties by name."""
        return self.search_terms(query_terms(query), limit)

    def search_terms(self, qterms: Mapping[str, QueryTerm], limit: int = 10) -> list[Hit]:
        """``search`` for terms already made by ``text.query_terms``."""
        if limit <= 0:
            return []
        present = [(t, qterms[t][0], p) for t in sorted(qterms) if (p := self.postings.get(t)) is not None]
        # The reason reads the terms in term order, each with how it matched.
        ordered = [(p, qterms[t].word, qterms[t].label(t)) for t, _, p in present]
        # Scores add the terms in a fixed order (best possible contribution first, then the
        # term), so float sums repeat.
        present.sort(key=lambda x: (-x[1] * x[2].top, x[0]))
        weighted = [(w, p) for _, w, p in present]
        acc = threshold(weighted, limit)
        if acc is None:
            acc = exhaustive(weighted, limit)
        # Rounded before comparing so that scores equal up to float noise tie, and then the
        # lower doc id (the earlier name) wins. (nsmallest is sorted()[:limit], cheaper on many.)
        items = acc.items()
        best = sorted(items, key=_rank)[:limit] if len(acc) <= 4 * limit else heapq.nsmallest(limit, items, key=_rank)
        return [self._hit(doc, score, ordered) for doc, score in best]

    def _hit(self, doc: int, score: float, ordered: list[tuple[_Postings, str, str]]) -> Hit:
        mask = 0
        matched: list[str] = []
        why: list[tuple[str, tuple[str, ...]]] = []
        votes: dict[int, int] = {}
        for post, word, label in ordered:
            if (imp := post.impact) is not None and imp.where is not None:
                i = imp.where[doc] - 1
                if i < 0:
                    continue
            else:
                docs = post.docs
                i = bisect_left(docs, doc)
                if i == len(docs) or docs[i] != doc:
                    continue
            mask |= post.masks[i]
            why.append((label, _LABELS[post.masks[i]]))
            if word not in matched:
                matched.append(word)
            section = post.sections[i]
            if section != NO_SECTION:
                votes[section] = votes.get(section, 0) + 1
        heads = self.headings[doc]
        # The section most query words point at; the earlier one on a tie.
        section = min(votes, key=lambda s: (-votes[s], s)) if votes else NO_SECTION
        return Hit(
            name=self.names[doc],
            score=round(score, 6),
            fields=_LABELS[mask],
            matched=tuple(matched),
            section=heads[section] if section < len(heads) else None,
            why=tuple(why),
        )


def _rank(item: tuple[int, float]) -> tuple[float, int]:
    return -round(item[1], 9), item[0]


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
