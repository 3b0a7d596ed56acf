"""Query evaluation: the exact scores of a set of skills that holds the best ``limit``.

A query's score for a skill is the sum, over the query's terms in one fixed order, of
``weight * score`` (terms the skill lacks add nothing), and the ranking key is
``(-round(score, 9), doc id)``. Both evaluators below return exact scores, summed in that
order, for a set of docs guaranteed to contain the ``limit`` best by that key; the caller
ranks them.

- ``threshold`` reads only the heads of the terms' impact-ordered lists (``postings.Impact``),
  in the spirit of Fagin's threshold algorithm: every skill it has not seen scores at most
  ``F``, the sum of the first unread score of each list; every skill it has seen is bounded
  by what it read of it plus, for each list it was not seen in, that list's position table
  (exact) or first unread score. Skills are scored exactly best bound first, until no bound
  left can reach the ``limit``-th exact score. If ``F`` is still too high it reads twice as
  deep, up to the whole head, and gives up (None) past that.
- ``exhaustive`` adds up whole posting lists, term-at-a-time with MaxScore-style pruning. It
  is the fallback, and the cheaper way when the lists are short.

Pruning compares with a margin (``EPSILON``) far above float noise and far below the 9
decimals the ranking compares, so a skill is only dropped when it is certainly ranked
below ``limit`` others.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter, mul

from skill_mcp.search.postings import FIRST_DEPTH, _Postings

EPSILON = 1e-6
_BY_VALUE = itemgetter(1)

Present = Sequence[tuple[float, _Postings]]  # (query weight, postings) in the fixed term order


def exhaustive(present: Present, limit: int) -> dict[int, float]:
    """Term-at-a-time scoring with MaxScore-style pruning.

    Terms go in order of their best possible contribution. Once the ``limit``-th best score
    so far beats everything the remaining terms could still add, no new skill can enter the
    result: the remaining terms are then only looked up for the candidates still in reach.
    """
    rest = sum(w * p.top for w, p in present)
    acc: dict[int, float] = {}
    pruned = False
    for weight, post in present:
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
            if rest + EPSILON < theta:
                pruned = True
                acc = {d: s for d, s in acc.items() if s + rest + EPSILON >= theta}
    return acc


def threshold(present: Present, limit: int) -> dict[int, float] | None:
    """Exact scores of a set holding the best ``limit``, read from the impact heads; None when
    the heads are too short to prove it (then ``exhaustive`` must run)."""
    depth = FIRST_DEPTH
    while True:
        found, deeper = _at_depth(present, limit, depth)
        if found is not None or not deeper:
            return found
        depth *= 2


# What one query read of one term: weight, the head's (doc -> weight * score) so far, the bound
# of what is unread, whether nothing is unread, and the list itself.
_Read = tuple[float, dict[int, float], float, bool, _Postings]


def _read(present: Present, depth: int) -> tuple[list[_Read], dict[int, float], float, bool]:
    """Read each head to ``depth``. Also returns, per doc seen, the sum over the lists it was
    seen in of (its contribution - the list's bound), the sum of the bounds, and whether
    some head is longer than ``depth``."""
    reads: list[_Read] = []
    excess: dict[int, float] = {}
    bound = 0.0
    deeper = False
    for weight, post in present:
        imp = post.impact
        if imp is None:
            docs, scores, unread, complete = post.docs, post.scores, 0.0, True
        elif depth < len(imp.docs):
            docs, scores = imp.docs[:depth], imp.scores[:depth]
            unread, complete, deeper = weight * imp.scores[depth], False, True
        else:
            docs, scores, unread, complete = imp.docs, imp.scores, weight * imp.rest, imp.rest == 0.0
        # weight * score, as the exhaustive sum adds it (1.0 * score is score)
        known = dict(zip(docs, scores if weight == 1.0 else map(mul, repeat(weight), scores), strict=True))
        get = excess.get
        for doc, x in known.items():
            excess[doc] = get(doc, 0.0) + (x - unread)
        bound += unread
        reads.append((weight, known, unread, complete, post))
    return reads, excess, bound, deeper


def _at_depth(present: Present, limit: int, depth: int) -> tuple[dict[int, float] | None, bool]:
    reads, excess, bound, deeper = _read(present, depth)
    # Lists with a position table give a seen doc's exact contribution for the price of an
    # array read: used to tighten its bound before paying for an exact score.
    tables = [(known, unread, where, weight, post.scores) for weight, known, unread, complete, post in reads
              if not complete and post.impact is not None and (where := post.impact.where) is not None]
    out: dict[int, float] = {}
    best: list[float] = []  # min-heap of the ``limit`` best exact scores so far
    cut = -1.0  # best[0] - EPSILON once ``best`` is full: a doc bounded below it is out
    for doc, extra in sorted(excess.items(), key=_BY_VALUE, reverse=True):
        # bound + extra bounds this doc's score: what it scored where it was seen, and each
        # other list's bound. Sorted on it, so once it cannot reach the cut, nothing later can.
        ub = bound + extra
        if ub < cut:
            break
        for known, unread, where, weight, scores in tables:
            if doc not in known:
                pos = where[doc]
                ub += (weight * scores[pos - 1] if pos else 0.0) - unread
        if ub < cut:
            continue
        score = out[doc] = _score(doc, reads)
        if len(best) < limit:
            heapq.heappush(best, score)
        elif score > best[0]:
            heapq.heapreplace(best, score)
        if len(best) == limit:
            cut = best[0] - EPSILON
    if all(r[3] for r in reads):
        return out, False  # every posting was read: ``out`` holds every matching doc it needs
    if bound < cut:
        return out, False  # no unseen doc can reach the ``limit``-th score
    return None, deeper


def _score(doc: int, reads: list[_Read]) -> float:
    """The doc's exact score, summed in term order. Contributions come from the heads read,
    then the position tables; only the rest need a binary search."""
    score = 0.0
    for weight, known, _, complete, post in reads:
        x = known.get(doc)
        if x is None:
            x = 0.0
            if not complete:
                if (imp := post.impact) is not None and (where := imp.where) is not None:
                    pos = where[doc] - 1
                else:
                    docs = post.docs
                    pos = bisect_left(docs, doc)
                    if pos == len(docs) or docs[pos] != doc:
                        pos = -1
                if pos >= 0:
                    x = weight * post.scores[pos]
        score += x
    return score
