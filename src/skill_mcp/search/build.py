"""Build a ``SearchIndex`` fast: the per-word and per-posting work runs in C loops.

A 10,000-skill catalog holds tens of millions of words and millions of postings, so any Python
statement executed per word or per posting costs seconds. The build therefore:

- maps each distinct token to an integer term id once (``_Vocabulary.__missing__``) and counts
  a text with ``Counter(map(vocab.__getitem__, tokens))``, which runs in C;
- finds the section each body term first occurs in from the order ``Counter`` keeps (first
  occurrence) and its size after each section: the counter is seeded with the heading terms
  (a heading beats the text under an earlier one), so section values are set per run of new
  terms, not per term;
- appends a doc's postings to per-term ``array`` columns, one packed 64-bit value per posting
  (body frequency, section, doc id) with ``map(array.append, ...)``, and splits the columns
  apart at the end with byte slices; only the few terms of the short fields (name,
  description, tags, headings) get Python work per posting, and those occurrences are kept as
  packed integers in arrays, not as tuples;
- computes the BM25F scores per term at the end, when the average field lengths are known,
  reading one list of per-doc scales in doc order, in the same float operations in the same
  order as the reference build (``tests/search/reference_build.py``), so the scores (and so
  the rankings) are bit-for-bit the same.

Each doc's body is consumed as it streams past and never retained.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter, deque
from collections.abc import Iterable
from itertools import chain, pairwise, repeat
from operator import mul, or_

from skill_mcp.catalog.lazy import collector_paused
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
from skill_mcp.search.markdown import split_sections
from skill_mcp.search.postings import _Postings, make_postings
from skill_mcp.search.text import _split_token, _term_of, _tokens

_BODY = int(Field.BODY)
_BODY_BIT = 1 << _BODY
_NAME_BITS = (1 << Field.NAME) | (1 << Field.TITLE)

# A posting is packed into one 64-bit integer while the index is built: the body frequency in
# bytes 0-2, the section in bytes 3-4, the doc id in bytes 5-7 (little-endian). One append per
# posting instead of three, and the section and doc id bits are set per section, not per
# posting; the columns are split apart again with byte slices.
_SECTION_SHIFT, _DOC_SHIFT = 24, 40
MAX_DOCS = 1 << 24
_MAX_TF = 1 << 24
_TF_FIELD = (1 << 29) - 1  # the tf bits of an ``extras`` code
_LITTLE = sys.byteorder == "little"


class _Vocabulary(dict[str, int]):
    """token -> code: a term id (> 0), 0 for no term (a stop word), or -k for a token that
    yields several terms (camelCase), whose term ids are ``compounds[k]``."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: list[str] = [""]  # term id -> term
        self.ids: dict[str, int] = {}
        self.compounds: list[tuple[int, ...]] = [()]

    def _id(self, term: str) -> int:
        tid = self.ids.get(term)
        if tid is None:
            tid = self.ids[term] = len(self.terms)
            self.terms.append(term)
        return tid

    def __missing__(self, token: str) -> int:
        found = [self._id(t) for t in map(_term_of, _split_token(token)) if t]
        code = found[0] if len(found) == 1 else 0
        if len(found) > 1:
            code = -len(self.compounds)
            self.compounds.append(tuple(found))
        self[token] = code
        return code


def _settle(vocab: _Vocabulary, counts: Counter[int], first: dict[int, int] | None = None) -> None:
    """Drop stop words and split compound tokens into their terms (first section: the earliest)."""
    counts.pop(0, None)
    if first is not None:
        first.pop(0, None)
    if not counts or min(counts) > 0:
        return
    for code in [c for c in counts if c < 0]:
        n = counts.pop(code)
        at = first.pop(code) if first is not None else 0
        for tid in vocab.compounds[-code]:
            counts[tid] += n
            if first is not None and at < first.get(tid, at + 1):
                first[tid] = at


def _count(vocab: _Vocabulary, tokens: Iterable[str]) -> Counter[int]:
    counts = Counter(map(vocab.__getitem__, tokens))
    _settle(vocab, counts)
    return counts


def _section(i: int, shift: int) -> int:
    return min(i - shift, NO_SECTION) if i >= shift else NO_SECTION


def _count_runs(vocab: _Vocabulary, texts: list[str], shift: int, tag: int) -> tuple[Counter[int], dict[int, int]]:
    """Term counts over ``texts``, and per term ``tag | section << _SECTION_SHIFT`` for the
    section of the first text holding it: text ``i`` is section ``i - shift``, or NO_SECTION
    when that is negative (clamped)."""
    counts: Counter[int] = Counter()
    ends = []
    get = vocab.__getitem__
    for text in texts:
        counts.update(map(get, _tokens(text)))
        ends.append(len(counts))  # Counter keeps first-occurrence order: keys[ends[i-1]:ends[i]] first occur in text i
    compound = bool(counts) and min(counts) < 0
    values: list[int] = []
    start = 0
    for i, end in enumerate(ends):
        # A compound token's terms take the earliest text of any of their tokens, so that
        # comparison happens on text indexes; the values are mapped afterwards.
        value = i if compound else tag | _section(i, shift) << _SECTION_SHIFT
        values.extend(repeat(value, end - start))
        start = end
    first = dict(zip(counts, values, strict=True))
    _settle(vocab, counts, first)
    if compound:
        first = {t: tag | _section(i, shift) << _SECTION_SHIFT for t, i in first.items()}
    return counts, first


def _count_body(
    vocab: _Vocabulary, texts: list[str], heads_first: dict[int, int], tag: int
) -> tuple[Counter[int], list[int], list[int], list[int]]:
    """The body's term counts, and its terms, their counts and their section values (``tag |
    section << _SECTION_SHIFT``) as three aligned lists. A term's section is the first heading
    that names it (``heads_first``), else the first text that holds it (``texts[0]``, the text
    before the first heading, is no section). Terms only in headings are counted 0.

    The counter is seeded with the heading terms, so they come first in its order, and every
    later term first occurs in the text whose run of new keys it is in: the section values are
    built per run, not per term.
    """
    counts: Counter[int] = Counter(dict.fromkeys(heads_first, 0))
    ends = [len(counts)]
    get = vocab.__getitem__
    for text in texts:
        counts.update(map(get, _tokens(text)))
        ends.append(len(counts))
    if counts and min(counts) < 0:
        # A compound token (camelCase) adds its terms at the end of the counter, each with the
        # earliest text of any of its tokens: the plain way, on text indexes.
        runs = (repeat(i, end - start) for i, (start, end) in enumerate(pairwise(ends)))
        at = dict(zip(counts, chain(repeat(-1, ends[0]), *runs), strict=True))  # -1: heading terms
        _settle(vocab, counts, at)
        first = {t: tag | _section(i, 1) << _SECTION_SHIFT for t, i in at.items()}
        first.update(heads_first)
        keys = list(counts)
        return counts, keys, list(counts.values()), list(map(first.__getitem__, keys))
    values = list(heads_first.values())
    for i, (start, end) in enumerate(pairwise(ends)):
        values.extend(repeat(tag | _section(i, 1) << _SECTION_SHIFT, end - start))
    keys = list(counts)
    tfs = list(counts.values())
    if 0 in counts:  # stop words
        counts.pop(0)
        i = keys.index(0)
        del keys[i], tfs[i], values[i]
    return counts, keys, tfs, values


def _unpack(col: array[int]) -> tuple[array[int], array[int], array[int]]:
    """Doc ids ('I'), body frequencies ('I') and sections ('H') of a packed column."""
    if not _LITTLE:
        col = array("Q", col)
        col.byteswap()
    raw = col.tobytes()
    n = len(col)
    docs, tfs, sections = bytearray(4 * n), bytearray(4 * n), bytearray(2 * n)
    for k in range(3):
        tfs[k::4] = raw[k::8]
        docs[k::4] = raw[5 + k :: 8]
    sections[0::2] = raw[3::8]
    sections[1::2] = raw[4::8]
    out = (array("I", docs), array("I", tfs), array("H", sections))
    if not _LITTLE:
        for a in out:
            a.byteswap()
    return out


class _Builder:
    """Per-term posting columns, filled one doc at a time with one C-level append per posting.
    Each column is written in doc order and read back in order: a gather by global position
    instead costs a cache miss per posting at 10,000 skills."""

    def __init__(self) -> None:
        self.vocab = _Vocabulary()
        self.cols: list[array[int]] = []  # term id -> packed postings ('Q'), in doc order
        # Short-field occurrences: term id -> one code per (posting, field the term is in),
        # ``row << 32 | tf << 3 | field``, a posting's codes together and in field order ('Q').
        self.extras: dict[int, array[int]] = {}
        self.lengths: list[list[int]] = [[] for _ in Field]  # field -> per-doc length
        self.names: list[str] = []
        self.headings: list[tuple[str, ...]] = []

    def _grow(self) -> None:
        for _ in range(len(self.vocab.terms) - len(self.cols)):
            self.cols.append(array("Q"))

    def add(self, doc: SearchDoc) -> None:
        if len(self.names) >= MAX_DOCS:
            raise ValueError(f"a search index holds at most {MAX_DOCS} skills")
        vocab = self.vocab
        name = _count(vocab, _tokens(doc.name))
        title = _count(vocab, _tokens(doc.title))
        if title.keys() == name.keys():
            title = Counter()  # the usual case: counting the same words twice would double the name
        tag = len(self.names) << _DOC_SHIFT
        headings: list[str]
        if doc.body:
            headings, texts = split_sections(doc.body)
            heads, section_of = _count_runs(vocab, headings, 0, tag)
            body, keys, tfs, sections = _count_body(vocab, texts, section_of, tag)
        else:  # what those give for no body (the short index of a two-phase build: every doc)
            headings, heads, body, keys, tfs, sections = [], Counter(), Counter(), [], [], []
        tags = _count(vocab, chain.from_iterable(map(_tokens, doc.tags)))
        short = (name, title, _count(vocab, _tokens(doc.description)), tags, heads)
        self._grow()
        cols, extras = self.cols, self.extras
        in_short: dict[int, int] = {}
        for f, field in enumerate(short):
            self.lengths[f].append(field.total())
            if field and max(field.values()) >= _MAX_TF:
                raise ValueError(f"a skill's {Field(f).name.lower()} repeats a word {_MAX_TF} times or more")
            for tid, tf in field.items():
                if (ext := extras.get(tid)) is None:
                    ext = extras[tid] = array("Q")
                ext.append(len(cols[tid]) << 32 | tf << 3 | f)  # the row this doc's posting gets
            in_short.update(field)
        self.lengths[_BODY].append(body.total())
        if tfs and max(tfs) >= _MAX_TF:
            raise ValueError(f"a skill's body repeats a word {_MAX_TF} times or more")
        for tid in in_short:
            if tid not in body:  # in the name, description or tags only
                keys.append(tid)
                tfs.append(0)
                sections.append(tag | NO_SECTION << _SECTION_SHIFT)
        packed = map(or_, tfs, sections)
        deque(map(array.append, map(cols.__getitem__, keys), packed), 0)
        self.names.append(doc.name)
        self.headings.append(tuple(headings))

    def _scales(self) -> list[list[float]]:
        """Per field, per doc: w_f / (1 - b_f + b_f * len_f(d) / avglen_f) (as in ``_pseudo_tf``)."""
        n = max(len(self.names), 1)
        avg = [max(sum(lengths) / n, 1.0) for lengths in self.lengths]
        return [[WEIGHTS[f] / (1.0 - B[f] + B[f] * length / avg[f]) for length in self.lengths[f]] for f in Field]

    def _term(self, tid: int, scales: list[list[float]]) -> _Postings:
        """One term's postings, in the float operations of the reference, in C loops for the
        body-only postings: x = scale * tf, score = idf * (x / (k1 + x))."""
        docs, tfs, sections = _unpack(self.cols[tid])
        n_docs = len(self.names)
        idf = _idf(n_docs, len(docs))
        body = scales[_BODY]
        # Read in doc order from one list of per-doc scales (cache-friendly), not from per-doc tables.
        xs = list(map(mul, map(body.__getitem__, docs), tfs))
        # The capped score is the reference's min(x, BODY_CAP) saturated, in the same float
        # operations; a comparison per posting here is cheaper than a min() call in the map.
        capped = idf * (BODY_CAP / (K1 + BODY_CAP))
        scores = [idf * (x / (K1 + x)) if x < BODY_CAP else capped for x in xs]
        masks = bytearray([_BODY_BIT]) * len(docs)
        in_names = []
        row, x, mask, doc = -2, 0.0, 0, 0  # -2: no posting open yet
        # A sentinel code (row -1) closes the last posting.
        for code in chain(self.extras.get(tid, ()), (-1,)):
            if code >> 32 != row:
                if row >= 0:
                    scores[row] = idf * (x / (K1 + x))
                    masks[row] = mask
                    if mask & _NAME_BITS:
                        in_names.append(row)
                if code < 0:
                    break
                row = code >> 32
                doc, tf_body = docs[row], tfs[row]
                x = min(body[doc] * tf_body, BODY_CAP)
                mask = _BODY_BIT if tf_body else 0
            f = code & 7
            x = x + scales[f][doc] * (code >> 3 & _TF_FIELD)  # field by field, in field order, as _pseudo_tf adds
            mask |= 1 << f
        if in_names:
            boost = NAME_BOOST * _idf(n_docs, len(in_names))
            for i in in_names:
                scores[i] += boost
        return make_postings(docs, array("f", scores), bytes(masks), sections, n_docs)

    def finish(self) -> SearchIndex:
        scales = self._scales()
        postings: dict[str, _Postings] = {}
        for tid in range(1, len(self.cols)):
            if self.cols[tid]:
                postings[self.vocab.terms[tid]] = self._term(tid, scales)
            self.cols[tid] = array("Q")  # done with this term's packed postings
        return SearchIndex(names=tuple(self.names), headings=tuple(self.headings), postings=postings)


def build_sorted(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index from docs already in name order (streamed: each body is dropped after use)."""
    builder = _Builder()
    # The build allocates millions of objects that live until it ends; the cyclic collector
    # would rescan them over and over (a measurable share of the build: bench/README.md, "Figures
    # behind design choices") and they hold no cycles.
    with collector_paused():
        for doc in docs:
            builder.add(doc)
        return builder.finish()


def build_index(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index. Doc ids follow name order, so ties broken by doc id are broken by name."""
    return build_sorted(sorted(docs, key=lambda d: d.name))
