"""The short index (names, frontmatter names, descriptions, tags; no body) built in C loops,
and each term's postings made when a query first reads that term.

The first phase of a two-phase build (``source.short_index``) indexes only what the catalog
records hold, and a first search waits for it, so it must cost little per skill. The general
builder (``build._Builder``) spends Python statements per skill (a ``Counter`` per field) and
per term (a posting list packed, unpacked and scored one term at a time); here every skill has
a few dozen words and most terms name one skill, so those costs were the build. This one:

- splits every text of every skill at once (one ``str.translate`` over the ASCII ones joined,
  as ``text._tokens`` splits each) and maps each token to its term once (``_Codes``), already
  shifted into an *entry* ``term << 27 | doc << 3 | field``, skill by skill, field by field;
- appends each entry to its term's column (one C-level ``map``), so a column holds the term's
  occurrences in doc order, a doc's fields in field order; stop words go to column 0, whose
  counts per skill and field are what the field lengths (and so the BM25F scales) leave out;
- and leaves the rest to the first query that reads the term (``_Short``, as the persisted
  index decodes a term's postings when first read: ``store._Stored``): its term frequencies,
  its pseudo-frequencies ``x = x + scale * tf`` field by field, its scores
  ``idf * (x / (k1 + x))`` plus the name boost, in the same float operations as
  ``build._Builder``, so every term's postings are bit for bit the ones ``build.build_sorted``
  makes of the same skills without bodies (``tests/search/test_short_build.py``).

A first search reads a handful of terms; the index holds thousands.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import and_, eq, mul, not_, or_, rshift, sub

from skill_mcp.catalog.lazy import collector_paused
from skill_mcp.search.build import _MAX_TF, _NAME_BITS, MAX_DOCS
from skill_mcp.search.index import K1, NAME_BOOST, NO_SECTION, WEIGHTS, B, Field, SearchIndex, _idf
from skill_mcp.search.postings import _Postings, make_postings
from skill_mcp.search.text import _ASCII_SEPARATORS, MAX_TERM_CHARS, _split_token, _term_of, _tokens

# An entry: ``term << _TERM_SHIFT | doc << 3 | field``. A posting is an entry without its field
# (``>> 3``): ``term << _DOC_BITS | doc``.
_DOC_BITS = 24  # MAX_DOCS == 1 << 24
_TERM_SHIFT = _DOC_BITS + 3
_DOC_MASK = (1 << _DOC_BITS) - 1
_DOC_FIELD = (1 << _TERM_SHIFT) - 1  # doc << 3 | field
_FIELDS = 4  # name, title, description, tags (headings and body are empty)

# What the short index takes of one skill: name, frontmatter name, description, tags.
ShortFields = tuple[str, str, str, tuple[str, ...]]


class _Codes(dict[str, int]):
    """token -> ``term << _TERM_SHIFT`` for a token with one term, 0 for none (a stop word), or
    ``-k`` for a token with several (camelCase), whose codes are ``compounds[k]``."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: list[str] = [""]  # term id -> term
        self.ids: dict[str, int] = {}
        self.compounds: list[tuple[int, ...]] = [()]

    def _code(self, term: str) -> int:
        tid = self.ids.get(term)
        if tid is None:
            tid = self.ids[term] = len(self.terms)
            self.terms.append(term)
        return tid << _TERM_SHIFT

    def __missing__(self, token: str) -> int:
        if token.isdigit() and token.isascii():  # a number is its own term (``text.stem``)
            code = self[token] = self._code(token) if len(token) <= MAX_TERM_CHARS else 0
            return code
        found = [self._code(t) for t in map(_term_of, _split_token(token)) if t]
        code = found[0] if len(found) == 1 else 0
        if len(found) > 1:
            code = -len(self.compounds)
            self.compounds.append(tuple(found))
        self[token] = code
        return code

    def expand(self, codes: Sequence[int]) -> list[tuple[int, ...]]:
        """Each code as the tuple of term codes it stands for (none for a stop word)."""
        table = {c: ((c,) if c > 0 else () if c == 0 else self.compounds[-c]) for c in set(codes)}
        return list(map(table.__getitem__, codes))

    def term_set(self, text: str) -> set[int]:
        return set(chain.from_iterable(self.expand(list(map(self.__getitem__, _tokens(text))))))


# Between two texts when all of a field are split at once: not a letter or digit, so never in a
# token, and kept by the table (a text that holds it is split on its own).
_SEP = "\x1f"
_KEEP_SEP = {c: " " for c in _ASCII_SEPARATORS if c != ord(_SEP)}


def _runs(texts: list[str], tags: list[tuple[str, ...]]) -> list[list[str]]:
    """``text._tokens`` of each text, as ``build._Builder`` splits it: every ASCII text in one
    ``str.translate`` of them all joined (a call per text costs more than the translation),
    the others on their own. Every fourth text is a tags field: the skill's tags joined by
    spaces, whose non-ASCII ones are split tag by tag (NFKC is never applied across two)."""
    plain = list(map(str.isascii, texts))
    joined = _SEP.join(compress(texts, plain))
    pieces = joined.translate(_KEEP_SEP).split(_SEP) if joined else []
    if len(pieces) != sum(plain):  # a text holds the separator: split them one by one
        pieces = list(map(str.translate, compress(texts, plain), repeat(_ASCII_SEPARATORS)))
    runs = list(map(str.split, pieces))
    if len(runs) == len(texts):
        return runs
    out: list[list[str]] = []
    ascii_runs = iter(runs)
    for i, (text, is_ascii) in enumerate(zip(texts, plain, strict=True)):
        if is_ascii:
            out.append(next(ascii_runs))
        elif i % _FIELDS == Field.TAGS:
            out.append(list(chain.from_iterable(map(_tokens, tags[i // _FIELDS]))))
        else:
            out.append(_tokens(text))
    return out


def _entries(codes_of: _Codes, fields: list[list[str]], tags: list[tuple[str, ...]]) -> tuple[list[int], list[int]]:
    """Every term occurrence of every skill as an entry (skill by skill, field by field; a stop
    word is an entry of term 0), and the length of each skill's field (its number of term
    occurrences: stop words dropped, compound tokens split), in the same order (``doc * 4 +
    field``). ``fields``: the texts of each field (tags joined by spaces)."""
    n = len(fields[0])
    runs = _runs(list(chain.from_iterable(zip(*fields, strict=True))), tags)  # doc by doc, field by field
    # doc << 3 | field of each run, then of each token
    at = list(chain.from_iterable(zip(*(range(f, 8 * n, 8) for f in range(_FIELDS)), strict=True)))
    sizes = list(map(len, runs))
    where = list(chain.from_iterable(map(repeat, at, sizes)))
    codes = list(map(codes_of.__getitem__, chain.from_iterable(runs)))
    del runs
    if codes and min(codes) < 0:  # a compound token: each of its terms is an occurrence
        parts = codes_of.expand(codes)
        where = list(chain.from_iterable(map(repeat, where, map(len, parts))))
        codes = list(chain.from_iterable(parts))
        at.append(8 * n)
        bounds = list(map(bisect_left, repeat(where), at))  # ``where`` is sorted
        sizes = list(map(sub, bounds[1:], bounds[:-1]))
    elif 0 in codes:
        # A stop word's entry is its run's ``doc << 3 | field``: counted, the stop words of each run.
        stops = Counter(compress(where, map(not_, codes)))
        sizes = list(map(sub, sizes, map(stops.get, at, repeat(0))))
    return list(map(or_, codes, where)), sizes


def _scales(lengths: list[list[int]], n: int) -> list[float]:
    """Per doc and field (at ``doc << 3 | field``): w_f / (1 - b_f + b_f * len_f(d) / avglen_f),
    as ``build._Builder._scales``."""
    scale = [0.0] * (8 * n)
    for f, field_lengths in enumerate(lengths):
        avg = max(sum(field_lengths) / max(n, 1), 1.0)
        scale[f::8] = [WEIGHTS[f] / (1.0 - B[f] + B[f] * length / avg) for length in field_lengths]
    return scale


def build_short(skills: Iterable[ShortFields]) -> SearchIndex:
    """The index of ``skills`` (name, frontmatter name, description, tags; in name order) with
    no body and no headings: what ``build.build_sorted`` makes of them as bodiless docs."""
    # Hundreds of thousands of tokens and integers, none in a cycle (as ``build.build_sorted``).
    with collector_paused():
        return _build(list(skills))


def _build(rows: list[ShortFields]) -> SearchIndex:
    n = len(rows)
    if n > MAX_DOCS:
        raise ValueError(f"a search index holds at most {MAX_DOCS} skills")
    names, titles, descriptions, tags = (
        (list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], [])
    )
    codes_of = _Codes()
    # The frontmatter name counts only when its words are not the name's (else the name would
    # count double); the usual case, the same string, needs no look.
    titles = [t if t != name else "" for t, name in zip(titles, names, strict=True)]
    for i in compress(range(n), titles):
        if codes_of.term_set(titles[i]) == codes_of.term_set(names[i]):
            titles[i] = ""
    entries, sizes = _entries(codes_of, [names, titles, descriptions, list(map(" ".join, tags))], tags)
    if sizes and max(sizes) >= _MAX_TF:  # only a field that long can repeat a word that often
        tf, entry = max((tf, e) for e, tf in Counter(entries).items() if e >> _TERM_SHIFT)
        if tf >= _MAX_TF:
            raise ValueError(f"a skill's {Field(entry & 7).name.lower()} repeats a word {_MAX_TF} times or more")
    # Each term's occurrences, in doc order and a doc's fields in field order.
    cols: list[array[int]] = [array("Q") for _ in codes_of.terms]
    deque(map(array.append, map(cols.__getitem__, map(rshift, entries, repeat(_TERM_SHIFT))), entries), 0)
    del entries
    cols[0] = array("Q")  # stop words
    lengths = [sizes[f::_FIELDS] for f in range(_FIELDS)]
    terms = codes_of.terms
    present = {terms[tid]: tid for tid in compress(range(len(cols)), cols)}
    postings = _Short(present, cols, _scales(lengths, n), n)
    return SearchIndex(names=tuple(names), headings=((),) * n, postings=postings)


class _Short(Mapping[str, _Postings]):
    """term -> postings, made from the term's occurrences the first time a query reads it."""

    def __init__(self, present: dict[str, int], cols: list[array[int]], scale: list[float], n_docs: int) -> None:
        self._tid = present
        self._cols = cols
        self._scale = scale
        self._n = n_docs
        self._made: dict[str, _Postings] = {}
        self._lock = threading.Lock()

    def __getitem__(self, term: str) -> _Postings:
        post = self._made.get(term)
        if post is None:
            col = self._cols[self._tid[term]]
            post = _postings(col, self._scale, self._n)
            with self._lock:
                post = self._made.setdefault(term, post)
        return post

    def __iter__(self) -> Iterator[str]:
        return iter(self._tid)

    def __len__(self) -> int:
        return len(self._tid)

    def __contains__(self, term: object) -> bool:
        return term in self._tid


def _postings(col: array[int], scale: list[float], n: int) -> _Postings:
    """One term's postings from its occurrences, as ``build._Builder._term`` makes them for a
    bodiless doc: x = 0.0 (the body's part) + scale * tf field by field (0.0 + y == y), score =
    idf * (x / (k1 + x)), and the name boost for a posting in the name or frontmatter name."""
    counts = Counter(col)  # entry -> tf, in order of first occurrence: doc order, field order
    entries = list(counts)
    where = list(map(and_, entries, repeat(_DOC_FIELD)))
    xs = list(map(mul, map(scale.__getitem__, where), counts.values()))
    bits = [1 << (w & 7) for w in where]
    posting = list(map(rshift, entries, repeat(3)))  # term << _DOC_BITS | doc
    more = list(map(eq, posting[1:], posting[:-1]))  # entry i + 1 adds to entry i's posting
    if any(more):
        for i in compress(range(1, len(posting)), more):
            xs[i] = xs[i - 1] + xs[i]
            bits[i] |= bits[i - 1]
        last = list(map(not_, more))
        last.append(True)
        xs = list(compress(xs, last))
        bits = list(compress(bits, last))
        posting = list(compress(posting, last))
    idf = _idf(n, len(posting))
    scores = [idf * (x / (K1 + x)) for x in xs]
    named = [i for i, b in enumerate(bits) if b & _NAME_BITS]
    if named:
        boost = NAME_BOOST * _idf(n, len(named))
        for i in named:
            scores[i] += boost
    docs = array("I", map(and_, posting, repeat(_DOC_MASK)))
    sections = array("H", [NO_SECTION]) * len(docs)
    return make_postings(docs, array("f", scores), bytes(bits), sections, n)
