"""The index build as first written: one plain Python step per word and per posting.

Kept here, out of the package, as the specification the fast build in
``skill_mcp.search.build`` must match bit for bit (``test_build.py``): same terms, same doc
ids, same float32 scores, same field masks and sections. It is slow (about 4x) and holds every
doc's counts until the end, which is why the package does not use it.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from itertools import filterfalse
from typing import Any

from skill_mcp.search.index import (
    BODY_CAP,
    K1,
    NAME_BOOST,
    NO_SECTION,
    WEIGHTS,
    B,
    Field,
    SearchDoc,
    SearchIndex,
    _idf,
)
from skill_mcp.search.markdown import split_markdown
from skill_mcp.search.postings import _Postings, make_postings
from skill_mcp.search.text import _split_token, _term_of, _tokens


class TermCounter:
    """Counts the terms of many texts fast, for one index build.

    Each distinct token is turned into its term once and memoised (for the life of this
    object). Counting then maps tokens to terms with ``map`` and ``Counter`` - loops that run
    in C - so Python does work per *new* token, not per word. A token that yields no term (a
    stop word) maps to ``""``; one that yields several (``camelCase``) maps to the terms joined
    by a space, and those few are split apart after counting.
    """

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}
        self._multi: set[str] = set()  # tokens that yield several terms

    def _learn(self, tokens: set[str]) -> None:
        # filterfalse over the new tokens, not a set difference with the memo: that would cost
        # the size of the memo on every call.
        for token in list(filterfalse(self._memo.__contains__, tokens)):
            found = [t for t in map(_term_of, _split_token(token)) if t]
            joined = " ".join(found)
            self._memo[token] = joined
            if len(found) > 1:
                self._multi.add(token)

    def _settle(self, tokens: set[str], counts: Counter[str], first: dict[str, int] | None) -> Counter[str]:
        counts.pop("", None)
        if first is not None:
            first.pop("", None)
        for joined in {self._memo[t] for t in filter(self._multi.__contains__, tokens)}:
            if joined not in counts:
                continue  # already split: two tokens can join to the same terms
            n = counts.pop(joined)
            at = first.pop(joined) if first is not None else 0
            for term in joined.split(" "):
                counts[term] += n
                if first is not None and at < first.get(term, at + 1):
                    first[term] = at
        return counts

    def count_sections(self, texts: list[str]) -> tuple[Counter[str], dict[str, int]]:
        """Term counts over all ``texts`` together, and the index of the first text each
        term occurs in."""
        sections = [_tokens(text) for text in texts]
        distinct = [set(tokens) for tokens in sections]
        union: set[str] = set().union(*distinct)
        self._learn(union)
        term_of = self._memo.__getitem__
        counts: Counter[str] = Counter()
        for tokens in sections:
            counts.update(map(term_of, tokens))
        first: dict[str, int] = {}
        for i in range(len(sections) - 1, -1, -1):  # earlier sections overwrite later ones
            first.update(dict.fromkeys(map(term_of, distinct[i]), i))
        return self._settle(union, counts, first), first

    def count(self, text: str) -> Counter[str]:
        """The same terms ``terms(text)`` yields, counted."""
        tokens = _tokens(text)
        distinct = set(tokens)
        self._learn(distinct)
        return self._settle(distinct, Counter(map(self._memo.__getitem__, tokens)), None)



def _doc_fields(doc: SearchDoc, counter: TermCounter) -> tuple[list[Counter[str]], dict[str, int], list[str]]:
    """Per-field term counts, the section each term points to, and the headings."""
    name_terms = counter.count(doc.name)
    title_terms = counter.count(doc.title)
    if set(title_terms) == set(name_terms):
        title_terms = Counter()  # the usual case: counting the same words twice would double the name
    headings, sections = split_markdown(doc.body)
    # A term's section is the first heading that names it, else the first section whose
    # text holds it: that is the passage a person would be pointed to.
    heading_terms, first_section = counter.count_sections(headings)
    body, first_text = counter.count_sections(sections)
    for t, i in first_text.items():
        if i and t not in first_section:
            first_section[t] = i - 1  # sections[0] is the text before the first heading
    tags: Counter[str] = Counter()
    for tag in doc.tags:
        tags.update(counter.count(tag))
    counts = [name_terms, title_terms, counter.count(doc.description), tags, heading_terms, body]
    return counts, first_section, headings


def _pseudo_tf(counts: list[Counter[str]], avg: list[float]) -> tuple[dict[str, float], dict[str, int]]:
    """BM25F pseudo-frequency and field mask of every term of one doc.

    The body is by far the largest field, so it seeds both dicts in one comprehension and
    the short fields are folded in after it.
    """
    body = counts[Field.BODY]
    b = int(Field.BODY)
    scale = WEIGHTS[b] / (1.0 - B[b] + B[b] * body.total() / avg[b])
    pseudo = {t: min(scale * tf, BODY_CAP) for t, tf in body.items()}
    masks = dict.fromkeys(body, 1 << b)
    for f in range(b):
        field = counts[f]
        if not field:
            continue
        scale = WEIGHTS[f] / (1.0 - B[f] + B[f] * field.total() / avg[f])
        bit = 1 << f
        for t, tf in field.items():
            pseudo[t] = pseudo.get(t, 0.0) + scale * tf
            masks[t] = masks.get(t, 0) | bit
    return pseudo, masks


def _postings(n_docs: int, flat: list[Any]) -> _Postings:
    """Arrays for one term from its flat rows ``[doc, saturated, mask, section, doc, ...]``."""
    masks = bytes(flat[2::4])
    idf = _idf(n_docs, len(masks))
    scores = [idf * x for x in flat[1::4]]
    name_bits = (1 << Field.NAME) | (1 << Field.TITLE)
    in_names = [i for i, m in enumerate(masks) if m & name_bits]
    if in_names:
        boost = NAME_BOOST * _idf(n_docs, len(in_names))
        for i in in_names:
            scores[i] += boost
    return make_postings(array("I", flat[0::4]), array("f", scores), masks, array("H", flat[3::4]), n_docs)


def build_index(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index. Each doc's body is consumed here and not retained."""
    ordered = sorted(docs, key=lambda d: d.name)
    per_doc: list[tuple[list[Counter[str]], dict[str, int]]] = []
    all_headings: list[tuple[str, ...]] = []
    totals = [0] * len(Field)
    counter = TermCounter()
    for doc in ordered:
        counts, first_section, headings = _doc_fields(doc, counter)
        per_doc.append((counts, first_section))
        all_headings.append(tuple(headings))
        for f, field in enumerate(counts):
            totals[f] += field.total()
    n = max(len(ordered), 1)
    avg = [max(t / n, 1.0) for t in totals]
    raw: dict[str, list[Any]] = {}
    get = raw.get
    for doc_id, (counts, first_section) in enumerate(per_doc):
        pseudo, masks = _pseudo_tf(counts, avg)
        section_of = first_section.get
        for t, tf_tilde in pseudo.items():
            row = (doc_id, tf_tilde / (K1 + tf_tilde), masks[t], min(section_of(t, NO_SECTION), NO_SECTION))
            rows = get(t)
            if rows is None:
                raw[t] = list(row)
            else:
                rows.extend(row)
        per_doc[doc_id] = ([], {})  # drop this doc's counts as soon as they are posted
    postings = {t: _postings(len(ordered), rows) for t, rows in raw.items()}
    return SearchIndex(names=tuple(d.name for d in ordered), headings=tuple(all_headings), postings=postings)
