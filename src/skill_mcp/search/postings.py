"""One term's posting list, and the impact-ordered head kept beside it for fast top-k queries.

The posting list proper (doc ids in order, the score of each, field masks, sections) is what
both builds produce and what the exhaustive query reads. Beside a list longer than
``FIRST_DEPTH`` the index keeps an ``Impact``, derived from the list alone:

- ``docs``/``scores``: the list's best ``HEAD`` postings, best score first (equal scores: the
  lower doc id first), so a query can read a term's best postings without touching the rest;
- ``rest``: an upper bound of every score not in the head (0.0 when the head is the list);
- ``where``: for a list that holds at least one skill in ``DENSE_SHARE``, a doc-id-indexed
  table of positions in the list, so "what does this term score in this skill?" is one array
  read instead of a binary search. Long lists are the expensive ones to search, and the table
  costs 2 bytes per skill, less than the list's own 11 bytes per posting.

Memory (10,000-skill bench corpus): heads add 12 MiB and tables 16 MiB to 85 MiB of postings.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass
from itertools import compress, repeat
from operator import le

HEAD = 256  # postings per impact-ordered head
FIRST_DEPTH = 64  # a query first reads this many postings of each head; shorter lists have no head
DENSE_SHARE = 4  # lists in at least 1/DENSE_SHARE of the skills get a position table
_SAMPLE_STEP = 16  # one score in this many is sorted to find the cutoff of a long list's head


@dataclass(frozen=True, slots=True)
class Impact:
    docs: array[int]  # head doc ids, best first ('I')
    scores: array[float]  # their scores ('f'), non-increasing
    rest: float  # >= every score not in the head; 0.0 when the head is the whole list
    where: array[int] | None  # doc id -> position in the posting list + 1, 0: absent ('H' or 'I')


@dataclass(frozen=True, slots=True)
class _Postings:
    docs: array[int]  # sorted doc ids ('I')
    scores: array[float]  # idf * tf~/(k1+tf~) per doc ('f')
    masks: bytes  # bit i set: the term occurs in Field(i)
    sections: array[int]  # heading index of the first body occurrence, or NO_SECTION ('H')
    top: float  # the largest score in ``scores``: this term's upper bound, for pruning
    impact: Impact | None = None  # None for a list of at most FIRST_DEPTH postings


def make_postings(docs: array[int], scores: array[float], masks: bytes, sections: array[int], n_docs: int) -> _Postings:
    """A term's postings with its bound and impact head (both builds end here)."""
    # The bound is taken from the stored (float32) values, so it is never below one of them.
    return _Postings(
        docs=docs,
        scores=scores,
        masks=masks,
        sections=sections,
        top=max(scores),
        impact=impact_of(docs, scores, n_docs),
    )


def _head(vals: list[float]) -> tuple[list[int], float]:
    """Positions of the best ``HEAD`` scores, best first (ties: earlier position first), and
    an upper bound of the scores left out."""
    n = len(vals)
    if n <= 2 * HEAD:
        order = sorted(range(n), key=vals.__getitem__, reverse=True)  # stable: ties keep doc order
        return order[:HEAD], (vals[order[HEAD]] if n > HEAD else 0.0)
    # Sorting a long list costs more than the rest of its build; sort only the postings at or
    # above a cutoff read off a sample, which keeps about 1.5 x HEAD of them. Whatever it keeps
    # is a prefix of the impact order, so a short pick just makes a shorter head.
    sample = sorted(vals[::_SAMPLE_STEP], reverse=True)
    cut = sample[min(len(sample) - 1, 3 * HEAD // 2 // _SAMPLE_STEP)]
    picked = compress(range(n), map(le, repeat(cut), vals))
    order = sorted(picked, key=vals.__getitem__, reverse=True)
    if len(order) > HEAD:
        return order[:HEAD], vals[order[HEAD]]
    return order, (cut if len(order) < n else 0.0)


def impact_of(docs: array[int], scores: array[float], n_docs: int) -> Impact | None:
    n = len(docs)
    if n <= FIRST_DEPTH:
        return None
    vals = scores.tolist()
    head, rest = _head(vals)
    where = None
    if n > HEAD and n * DENSE_SHARE >= n_docs:
        where = array("H" if n < 1 << 16 else "I")
        where.frombytes(bytes(where.itemsize * n_docs))
        deque(map(where.__setitem__, docs, range(1, n + 1)), 0)
    return Impact(
        docs=array("I", [docs[i] for i in head]), scores=array("f", [vals[i] for i in head]), rest=rest, where=where
    )
