"""The index build by brute force: every term of every skill scored straight from the formula.

The specification the fast build in ``skill_mcp.search.build`` must match bit for bit
(``test_build.py``): same terms, same doc ids, same float32 scores, same field masks and
sections. It shares none of the build's machinery (no vocabulary, no token memo, no column
arrays): it counts each field with ``terms`` and splits bodies with ``split_markdown`` (the
definitions), then for each term and skill evaluates ``index``'s BM25F formula as written there,
adding the fields in one fixed order (body first, capped, then name to headings) so the float
sums are the build's. ``make_postings`` only packs the finished columns.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable

from skill_mcp.search.index import BODY_CAP, K1, NAME_BOOST, NO_SECTION, WEIGHTS, B, Field, SearchDoc, SearchIndex, _idf
from skill_mcp.search.markdown import split_markdown
from skill_mcp.search.postings import make_postings
from skill_mcp.search.text import terms


def _fields(doc: SearchDoc) -> tuple[list[Counter[str]], list[str], list[str]]:
    """A skill's term counts per field (in ``Field`` order), its headings and its sections."""
    name, title = Counter(terms(doc.name)), Counter(terms(doc.title))
    if set(title) == set(name):
        title = Counter()  # the same words twice would count the name double
    headings, sections = split_markdown(doc.body)
    tags = Counter(t for tag in doc.tags for t in terms(tag))
    heads = Counter(t for h in headings for t in terms(h))
    body = Counter(t for s in sections for t in terms(s))
    return [name, title, Counter(terms(doc.description)), tags, heads, body], headings, sections


def _section(term: str, headings: list[str], sections: list[str]) -> int:
    """The first heading naming ``term``, else the heading over the first section holding it
    (none when that is ``sections[0]``, the text before the first heading)."""
    for i, heading in enumerate(headings):
        if term in terms(heading):
            return i
    for i, text in enumerate(sections):
        if term in terms(text):
            return i - 1 if i else NO_SECTION
    return NO_SECTION


def _pseudo_tf(term: str, fields: list[Counter[str]], avg: list[float]) -> float:
    """tf~ = sum_f w_f * tf_f / (1 - b_f + b_f * len_f / avglen_f), the body's part capped."""
    body = int(Field.BODY)
    tf = fields[body][term]
    total = min(WEIGHTS[body] / (1.0 - B[body] + B[body] * fields[body].total() / avg[body]) * tf, BODY_CAP)
    for f in range(body):
        if fields[f][term]:
            total += WEIGHTS[f] / (1.0 - B[f] + B[f] * fields[f].total() / avg[f]) * fields[f][term]
    return total


def build_index(docs: Iterable[SearchDoc]) -> SearchIndex:
    ordered = sorted(docs, key=lambda d: d.name)
    parsed = [_fields(d) for d in ordered]
    n = len(ordered)
    avg = [max(sum(p[0][f].total() for p in parsed) / max(n, 1), 1.0) for f in range(len(Field))]
    vocabulary = sorted({t for fields, _, _ in parsed for field in fields for t in field})
    names = (1 << Field.NAME) | (1 << Field.TITLE)
    postings = {}
    for term in vocabulary:
        holders = [d for d, (fields, _, _) in enumerate(parsed) if any(term in field for field in fields)]
        masks = bytes(sum(1 << f for f, field in enumerate(parsed[d][0]) if term in field) for d in holders)
        idf, in_names = _idf(n, len(holders)), sum(1 for m in masks if m & names)
        scores = []
        for d, mask in zip(holders, masks, strict=True):
            tf = _pseudo_tf(term, parsed[d][0], avg)
            score = idf * (tf / (K1 + tf))
            if mask & names:
                score += NAME_BOOST * _idf(n, in_names)
            scores.append(score)
        sections = [min(_section(term, parsed[d][1], parsed[d][2]), NO_SECTION) for d in holders]
        postings[term] = make_postings(array("I", holders), array("f", scores), masks, array("H", sections), n)
    return SearchIndex(
        names=tuple(d.name for d in ordered), headings=tuple(tuple(p[1]) for p in parsed), postings=postings
    )
