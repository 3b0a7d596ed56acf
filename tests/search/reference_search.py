"""The query by brute force: every skill scored from its postings, no pruning, no heads, no heap.

The specification ``skill_mcp.search.topk`` (through ``SearchIndex.search``) must match exactly
(``test_topk.py``): same hits, same order, same scores, same matched words, fields and sections.
It shares none of the query's machinery: it reads each query term's posting arrays into a
dict once, scores every skill any term names by the definition (the sum, over the query's terms
in the fixed order, of weight times the skill's score in that term's list) and sorts them all.
"""

from __future__ import annotations

from collections import Counter

from skill_mcp.search.index import FIELD_LABELS, NO_SECTION, Field, Hit, SearchIndex
from skill_mcp.search.text import QueryTerm, query_terms


def search(index: SearchIndex, query: str, limit: int = 10) -> list[Hit]:
    """Rank skills for ``query``; at most ``limit`` hits, best first, ties by name."""
    if limit <= 0:
        return []
    qterms = query_terms(query)
    # term -> {doc: (score, field mask, section)}, for the query's terms the index holds
    rows = {
        t: {d: (s, m, sec) for d, s, m, sec in zip(p.docs, p.scores, p.masks, p.sections, strict=True)}
        for t in qterms
        if (p := index.postings.get(t)) is not None
    }
    # The order scores are summed in (floats add in a fixed order, so sums repeat exactly): the
    # term's best possible contribution first, then the term.
    order = sorted(rows, key=lambda t: (-qterms[t][0] * max(s for s, _, _ in rows[t].values()), t))
    scores = {}
    for doc in {d for row in rows.values() for d in row}:
        total = 0.0
        for t in order:
            if doc in rows[t]:
                total += qterms[t][0] * rows[t][doc][0]
        scores[doc] = total
    # Scores equal to 9 decimals tie; the earlier name (the lower doc id) wins.
    best = sorted(scores, key=lambda d: (-round(scores[d], 9), d))[:limit]
    return [_hit(index, doc, scores[doc], qterms, rows) for doc in best]


def _labels(mask: int) -> tuple[str, ...]:
    return tuple(FIELD_LABELS[f] for f in Field if mask & (1 << f))


def _hit(
    index: SearchIndex,
    doc: int,
    score: float,
    qterms: dict[str, QueryTerm],
    rows: dict[str, dict[int, tuple[float, int, int]]],
) -> Hit:
    """Which words matched (in term order), how and in which fields, and the section most of them point at."""
    mask, matched, why, votes = 0, [], [], Counter[int]()
    for term in sorted(rows):
        if doc not in rows[term]:
            continue
        _, field_mask, section = rows[term][doc]
        mask |= field_mask
        why.append((qterms[term].label(term), _labels(field_mask)))
        if qterms[term].word not in matched:
            matched.append(qterms[term].word)
        if section != NO_SECTION:
            votes[section] += 1
    heads = index.headings[doc]
    section = min(votes, key=lambda s: (-votes[s], s)) if votes else NO_SECTION
    return Hit(
        name=index.names[doc],
        score=round(score, 6),
        fields=_labels(mask),
        matched=tuple(matched),
        section=heads[section] if section < len(heads) else None,
        why=tuple(why),
    )
