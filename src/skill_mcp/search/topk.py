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
  left can reach the ``limit``-th exact score. If ``F`` is still not below that score, it
  reads deeper, but only to a depth where the heads show ``F`` would be (they store every
  score in order), and gives up (None) when there is none. A top-10 query over lists of
  thousands of postings usually reads 64 postings of each.
- ``exhaustive`` adds up whole posting lists, term-at-a-time with MaxScore-style pruning. It
  is the fallback, and the cheaper way when the lists are short or the terms many.

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
# Past this many terms the bound of what is unread (a sum over the terms) seldom falls below the
# cut, and every doc seen costs a look-up per term: adding up the lists is cheaper.
MAX_TERMS = 8
# At this many postings per term on average or fewer, adding up the lists is as cheap.
_SHORT_LISTS = 4 * FIRST_DEPTH
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
    the heads are too short to prove it, or not worth reading (then ``exhaustive`` must run)."""
    if not 0 < len(present) <= MAX_TERMS or sum(len(p.docs) for _, p in present) <= _SHORT_LISTS * len(present):
        return None
    depth: int | None = FIRST_DEPTH
    while depth is not None:
        found, cut = _at_depth(present, limit, depth)
        if found is not None:
            return found
        depth = _deeper(present, depth, cut)
    return None


def _deeper(present: Present, depth: int, cut: float) -> int | None:
    """The next depth worth reading, or None. Reading to depth ``d`` can only succeed if the
    bound of what is left unread there is below ``cut`` (the ``limit``-th exact score found so
    far minus the margin, -1.0 before there are ``limit``), which the heads tell without
    reading: the shallowest such ``d`` is read next, none means give up."""
    longest = max((len(p.impact.docs) for _, p in present if p.impact is not None), default=0)
    d = 2 * depth
    while depth < longest:
        d = min(d, longest)
        if cut < 0.0 or _unread(present, d) < cut:
            return d
        depth, d = d, 2 * d
    return None


def _unread(present: Present, depth: int) -> float:
    """The bound of every score not in the first ``depth`` postings of the heads."""
    bound = 0.0
    for weight, post in present:
        if (imp := post.impact) is not None:
            bound += weight * (imp.scores[depth] if depth < len(imp.docs) else imp.rest)
    return bound


# What one query read of one term: weight, the head's (doc -> weight * score) so far, the bound
# of what is unread, whether nothing is unread, and the list itself.
_Read = tuple[float, dict[int, float], float, bool, _Postings]


def _read(present: Present, depth: int) -> tuple[list[_Read], dict[int, float], float]:
    """Read each head to ``depth``. Also returns, per doc seen, the sum over the lists it was
    seen in of (its contribution - the list's bound), and the sum of the bounds."""
    reads: list[_Read] = []
    excess: dict[int, float] = {}
    bound = 0.0
    for weight, post in present:
        imp = post.impact
        if imp is None:
            docs, scores, unread, complete = post.docs, post.scores, 0.0, True
        elif depth < len(imp.docs):
            docs, scores = imp.docs[:depth], imp.scores[:depth]
            unread, complete = weight * imp.scores[depth], False
        else:
            docs, scores, unread, complete = imp.docs, imp.scores, weight * imp.rest, imp.rest == 0.0
        # weight * score, as the exhaustive sum adds it (1.0 * score is score)
        known = dict(zip(docs, scores if weight == 1.0 else map(mul, repeat(weight), scores), strict=True))
        get = excess.get
        for doc, x in known.items():
            excess[doc] = get(doc, 0.0) + (x - unread)
        bound += unread
        reads.append((weight, known, unread, complete, post))
    return reads, excess, bound


def _at_depth(present: Present, limit: int, depth: int) -> tuple[dict[int, float] | None, float]:
    """Read the heads to ``depth``; the exact scores that hold the best ``limit`` if that
    proves them, else None, and the cut reached (-1.0: fewer than ``limit`` docs seen)."""
    reads, excess, bound = _read(present, depth)
    # Lists with a position table give a seen doc's exact contribution for the price of an
    # array read: used to tighten its bound before paying for an exact score.
    tables = [
        (known, unread, where, weight, post.scores)
        for weight, known, unread, complete, post in reads
        if not complete and post.impact is not None and (where := post.impact.where) is not None
    ]
    out: dict[int, float] = {}
    best: list[float] = []  # min-heap of the ``limit`` best exact scores so far
    cut = -1.0  # best[0] - EPSILON once ``best`` is full: a doc bounded below it is out
    everything = all(r[3] for r in reads)
    for doc, extra in sorted(excess.items(), key=_BY_VALUE, reverse=True):
        # bound + extra bounds this doc's score: what it scored where it was seen, and each
        # other list's bound. Sorted on it, so once it cannot reach the cut, nothing later can.
        ub = bound + extra
        if ub < cut:
            break
        if extra < EPSILON and cut <= bound and not everything:
            return None, cut  # no doc left can lift the cut above ``bound``: this depth fails
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
    if everything:
        return out, cut  # every posting was read: ``out`` holds every matching doc it needs
    if bound < cut:
        return out, cut  # no unseen doc can reach the ``limit``-th score
    return None, cut


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
