"""Build a ``SearchIndex`` fast: the per-word and per-posting work runs in C loops.

A 10,000-skill catalog holds tens of millions of words and millions of postings, so any Python
statement executed per word or per posting costs seconds. The build therefore:

- maps each distinct token to an integer term id once (``_Vocabulary.__missing__``) and counts
  a text with ``Counter(map(vocab.__getitem__, tokens))``, which runs in C;
- finds the section each body term first occurs in from the order ``Counter`` keeps (first
  occurrence) and its size after each section, instead of per-term bookkeeping;
- appends a doc's postings to per-term ``array`` columns with ``map(array.append, ...)``, keeping
  the raw body frequency; only the few terms of the short fields (name, description, tags,
  headings) get Python work per posting;
- computes the BM25F scores per term at the end, when the average field lengths are known, with
  ``map`` over the columns, in the same float operations in the same order as the reference
  formula in ``index.py``, so the scores (and so the rankings) are bit-for-bit the same.

Each doc's body is consumed as it streams past and never retained.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, deque
from collections.abc import Iterable
from itertools import chain, filterfalse, repeat
from operator import itemgetter
from typing import TypeVar

from skill_mcp.search.index import (
    K1,
    NAME_BOOST,
    NO_SECTION,
    WEIGHTS,
    B,
    Field,
    SearchDoc,
    SearchIndex,
    _idf,
    _Postings,
    split_markdown,
)
from skill_mcp.search.text import _split_token, _term_of, _tokens

_T = TypeVar("_T")
_BODY = int(Field.BODY)
_SHORT = _BODY  # fields 0.._BODY-1 are short: name, title, description, tags, headings
_BODY_BIT = 1 << _BODY
_NAME_BITS = (1 << Field.NAME) | (1 << Field.TITLE)

# Lines that may start a heading or a code fence. The fast splitter below only applies where
# "\n" is the only line break and lstrip() can only strip " ", "\t" and "\x1f" (ASCII text
# without the other characters str.splitlines() breaks on); other text takes the exact path.
_CANDIDATE = re.compile(r"^[ \t\x1f]*(?=#|```|~~~)", re.MULTILINE)
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def split_sections(body: str) -> tuple[list[str], list[str]]:
    """``split_markdown`` (same headings, same words per section), without a Python step per line."""
    if not body.isascii() or any(c in body for c in _OTHER_BREAKS):
        return split_markdown(body)
    headings: list[str] = []
    sections: list[str] = []
    fence: str | None = None
    start = 0  # where the current section's text begins
    for m in _CANDIDATE.finditer(body):
        end = body.find("\n", m.end())
        end = len(body) if end < 0 else end
        stripped = body[m.end():end]
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        elif fence is None:
            level = len(stripped) - len(stripped.lstrip("#"))
            title = stripped.lstrip("#").strip()
            if title and level <= 6:
                headings.append(title[:120])
                sections.append(body[start:m.start()])
                start = end
    sections.append(body[start:])
    return headings, sections


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


def _count_runs(vocab: _Vocabulary, texts: list[str], shift: int) -> tuple[Counter[int], dict[int, int]]:
    """Term counts over ``texts``, and per term the section value of the first text holding it:
    text ``i`` has value ``i - shift``, or NO_SECTION when that is negative (clamped)."""
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
        value = i if compound else (min(i - shift, NO_SECTION) if i >= shift else NO_SECTION)
        values.extend(repeat(value, end - start))
        start = end
    first = dict(zip(counts, values, strict=True))
    _settle(vocab, counts, first)
    if compound:
        first = {t: (min(i - shift, NO_SECTION) if i >= shift else NO_SECTION) for t, i in first.items()}
    return counts, first


def _gather(values: array[int] | list[_T], where: array[int]) -> tuple[_T, ...]:
    """``values`` at the positions ``where``, in one C call."""
    if len(where) == 1:
        return (values[where[0]],)
    return itemgetter(*where)(values)  # type: ignore[no-any-return]


class _Builder:
    """Postings collected one doc at a time: per term, the global positions of its postings
    (one C-level append per posting); per position, in doc order, the doc, the body frequency
    and the section (extended in bulk per doc). Scores are made per doc, then gathered per term."""

    def __init__(self) -> None:
        self.vocab = _Vocabulary()
        self.positions: list[array[int]] = []  # term id -> global positions ('I'), ascending
        # Postings of terms in the short fields: (term id, row in the term's list, position, tfs)
        self.extras: list[tuple[int, int, int, list[int]]] = []
        # Lists, not arrays, where gathering them per term would otherwise box every value.
        self.doc_of: list[int] = []  # position -> doc id (the same int object for a whole doc)
        self.tf_of = array("I")  # position -> body term frequency; 0: the short fields only
        self.section_of = array("H")  # position -> section value (small ints: boxing is free)
        self.starts = [0]  # doc id -> its first position
        self.lengths: list[list[int]] = [[] for _ in Field]  # field -> per-doc length
        self.names: list[str] = []
        self.headings: list[tuple[str, ...]] = []

    def _grow(self) -> None:
        self.positions.extend(array("I") for _ in range(len(self.vocab.terms) - len(self.positions)))

    def add(self, doc: SearchDoc) -> None:
        vocab = self.vocab
        name = _count(vocab, _tokens(doc.name))
        title = _count(vocab, _tokens(doc.title))
        if title.keys() == name.keys():
            title = Counter()  # the usual case: counting the same words twice would double the name
        headings, texts = split_sections(doc.body)
        heads, section_of = _count_runs(vocab, headings, 0)
        body, body_first = _count_runs(vocab, texts, 1)
        body_first.update(section_of)  # a heading that names a term beats the text under an earlier one
        tags = _count(vocab, chain.from_iterable(map(_tokens, doc.tags)))
        short = (name, title, _count(vocab, _tokens(doc.description)), tags, heads)
        self._grow()
        rows: dict[int, list[int]] = {}
        for f, field in enumerate(short):
            self.lengths[f].append(field.total())
            for tid, tf in field.items():
                rows.setdefault(tid, [0] * _SHORT)[f] = tf
        self.lengths[_BODY].append(body.total())
        # Body-only terms first, then the terms of the short fields, so those sit at known positions.
        keys = list(filterfalse(rows.__contains__, body))
        start = self.starts[-1]
        positions = self.positions
        for tid, row in rows.items():
            self.extras.append((tid, len(positions[tid]), start + len(keys), row))
            keys.append(tid)
        deque(map(array.append, map(positions.__getitem__, keys), range(start, start + len(keys))), 0)
        self.doc_of.extend(repeat(len(self.names), len(keys)))
        self.tf_of.extend(map(body.get, keys, repeat(0)))
        self.section_of.extend(map(body_first.get, keys, repeat(NO_SECTION)))
        self.starts.append(start + len(keys))
        self.names.append(doc.name)
        self.headings.append(tuple(headings))

    def _scales(self) -> list[list[float]]:
        """Per field, per doc: w_f / (1 - b_f + b_f * len_f(d) / avglen_f) (as in ``_pseudo_tf``)."""
        n = max(len(self.names), 1)
        avg = [max(sum(lengths) / n, 1.0) for lengths in self.lengths]
        return [[WEIGHTS[f] / (1.0 - B[f] + B[f] * length / avg[f]) for length in self.lengths[f]] for f in Field]

    def _saturated(self, scales: list[list[float]]) -> tuple[list[float], dict[int, list[tuple[int, int]]]]:
        """Per position: tf~ / (k1 + tf~), with tf~ the BM25F pseudo-frequency; and per term the
        field masks of its postings that are not body-only (row, mask).

        A body-only posting's value depends only on its doc and its body frequency, and a doc
        has few distinct frequencies: each is computed once per doc and shared.
        """
        sat: list[float] = []
        tf_of = self.tf_of
        for doc, scale in enumerate(scales[_BODY]):
            tfs = tf_of[self.starts[doc]:self.starts[doc + 1]]
            table = {tf: (x := scale * tf) / (K1 + x) for tf in set(tfs)}
            sat.extend(map(table.__getitem__, tfs))
        masks: dict[int, list[tuple[int, int]]] = {}
        for tid, row_in_term, pos, row in self.extras:
            doc = self.doc_of[pos]
            x = scales[_BODY][doc] * tf_of[pos]
            mask = _BODY_BIT if tf_of[pos] else 0
            for f, tf in enumerate(row):
                if tf:
                    x = x + scales[f][doc] * tf  # field by field, in field order, as _pseudo_tf adds
                    mask |= 1 << f
            sat[pos] = x / (K1 + x)
            masks.setdefault(tid, []).append((row_in_term, mask))
        return sat, masks

    def finish(self) -> SearchIndex:
        sat, extra_masks = self._saturated(self._scales())
        self.tf_of = array("I")
        n_docs = len(self.names)
        postings: dict[str, _Postings] = {}
        for tid in range(1, len(self.positions)):
            where = self.positions[tid]
            if not where:
                continue
            idf = _idf(n_docs, len(where))
            scores = list(map(idf.__mul__, _gather(sat, where)))
            masks = bytearray([_BODY_BIT]) * len(where)
            in_names = []
            for i, mask in extra_masks.get(tid, ()):
                masks[i] = mask
                if mask & _NAME_BITS:
                    in_names.append(i)
            if in_names:
                boost = NAME_BOOST * _idf(n_docs, len(in_names))
                for i in in_names:
                    scores[i] += boost
            stored = array("f", scores)
            # The bound is taken from the stored (float32) values, so it is never below one of them.
            postings[self.vocab.terms[tid]] = _Postings(
                docs=array("I", _gather(self.doc_of, where)), scores=stored, masks=bytes(masks),
                sections=array("H", _gather(self.section_of, where)), top=max(stored))
            self.positions[tid] = array("I")  # done with this term
        return SearchIndex(names=tuple(self.names), headings=tuple(self.headings), postings=postings)


def build_sorted(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index from docs already in name order (streamed: each body is dropped after use)."""
    builder = _Builder()
    for doc in docs:
        builder.add(doc)
    return builder.finish()


def build_index(docs: Iterable[SearchDoc]) -> SearchIndex:
    """Build the index. Doc ids follow name order, so ties broken by doc id are broken by name."""
    return build_sorted(sorted(docs, key=lambda d: d.name))
