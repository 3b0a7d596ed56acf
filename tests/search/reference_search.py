"""The query as first written: plain term-at-a-time scoring with MaxScore-style pruning.

Kept here, out of the package, as the specification the impact-ordered query in
``skill_mcp.search.topk`` must match exactly (``test_topk.py``): same hits, same order, same
scores, same matched words, fields and sections, for every query. It reads only the posting
arrays (doc ids, scores, masks, sections), never the impact heads.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping

from skill_mcp.search.index import FIELD_LABELS, NO_SECTION, Field, Hit, SearchIndex
from skill_mcp.search.text import query_terms

_EPSILON = 1e-6


def search(index: SearchIndex, query: str, limit: int = 10) -> list[Hit]:
    """Rank skills for ``query``; at most ``limit`` hits, best first, ties by name."""
    if limit <= 0:
        return []
    qterms = query_terms(query)
    acc = _accumulate(index, qterms, limit)
    best = heapq.nsmallest(limit, acc.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
    return [_hit(index, doc, score, qterms) for doc, score in best]


def _accumulate(index: SearchIndex, qterms: Mapping[str, tuple[float, str]], limit: int) -> dict[int, float]:
    present = [(t, qterms[t][0], p) for t in sorted(qterms) if (p := index.postings.get(t)) is not None]
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


def _hit(index: SearchIndex, doc: int, score: float, qterms: Mapping[str, tuple[float, str]]) -> Hit:
    mask = 0
    matched: list[str] = []
    votes: Counter[int] = Counter()
    for term in sorted(qterms):
        post = index.postings.get(term)
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
    heads = index.headings[doc]
    section = min(votes, key=lambda s: (-votes[s], s)) if votes else NO_SECTION
    return Hit(
        name=index.names[doc],
        score=round(score, 6),
        fields=labels,
        matched=tuple(matched),
        section=heads[section] if section < len(heads) else None,
    )
