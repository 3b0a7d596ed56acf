"""Text normalisation shared by indexing and querying: one function turns text into terms.

The pipeline is deliberately small and deterministic (no model, no download, no locale):

1. Unicode NFKC, then case folding.
2. Split on anything that is not a letter or digit, so ``slack-gif-creator``,
   ``fill_form`` and ``pdf/docx`` become separate words; camelCase is split too. An
   apostrophe splits as well, so contractions and possessives leave fragments (``let's`` ->
   ``let`` ``s``, ``don't`` -> ``don`` ``t``); those fragments are stop words.
3. Drop stop words (function words a person types around the words that matter).
4. Stem with the Snowball English stemmer (PyStemmer, the Snowball project's C binding):
   inflection *and* the common derivational suffixes (``-ation``, ``-ize``, ``-ment``,
   ``-ness``), so ``features``/``feature``, ``executing``/``execution`` and
   ``generative``/``generate`` meet. Before it, British spellings are folded to American
   (``-ise`` -> ``-ize``, ``-our`` -> ``-or``, ``-yse`` -> ``-yze``), and irregular forms to
   their root (``wrote`` -> ``write``); after it, the few derivations Snowball leaves apart
   (``failure``/``failing``) are joined (``related.DERIVED``).

``query_terms`` then adds related words (``related``) to the query at reduced weight: people
name a format by its product and a need in everyday words, skills name them in their own
terms, and no stemming joins the two.
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple

import Stemmer

from skill_mcp.search import related
from skill_mcp.search.related import DERIVED, IRREGULAR

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_VOWEL = re.compile(r"[aeiouy]")
MAX_TERM_CHARS = 40

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "get",
        "got",
        "has",
        "have",
        "help",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "let",
        "lets",
        "like",
        "me",
        "my",
        "need",
        "needs",
        "of",
        "on",
        "or",
        "our",
        "ours",
        "out",
        "please",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "too",
        "up",
        "us",
        "via",
        "want",
        "wants",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "also",
        "about",
        "all",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "very",
        "each",
        "other",
        "using",
        "use",
        "used",
        "uses",
        # more of what people type around a request
        "am",
        "had",
        "did",
        "here",
        "now",
        "again",
        "only",
        "own",
        "same",
        "much",
        "many",
        "more",
        "most",
        "whether",
        "maybe",
        "really",
        "actually",
        "ok",
        "okay",
        "hey",
        "hi",
        "thanks",
        "thank",
        "gonna",
        "wanna",
        "kind",
        "sort",
        "bit",
        "someone",
        "something",
        "anything",
        "everything",
        "thing",
        "things",
        "stuff",
        "he",
        "she",
        "him",
        "her",
        "his",
        "they",
        "one",
        "ones",
        "able",
        "way",
        "going",
        "even",
        "still",
        # what an apostrophe leaves of a contraction or a possessive: let's, don't, i'm, we're,
        # i've, i'll, i'd, can't, won't ("s" must never become a term)
        "s",
        "t",
        "m",
        "re",
        "ve",
        "ll",
        "d",
        "don",
        "doesn",
        "didn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "wouldn",
        "couldn",
        "shouldn",
        "haven",
        "hasn",
        "hadn",
        "ain",
        "cannot",
    ]
)

# British -> American spellings, so one word has one term whichever way it was spelt:
# (endings, the letters replaced, their replacement, how many letters must come before).
_BRITISH = (
    (("ise", "ises", "ised", "ising", "isation", "isations", "iser", "isers"), "is", "iz", 3),  # organise
    (("yse", "yses", "ysed", "ysing"), "ys", "yz", 2),  # analyse, paralysed
    (("our", "ours", "oured", "ouring", "ourite", "ourites", "ourful"), "our", "or", 3),  # colour, favourite
)

_BRITISH_ENDINGS = tuple(e for endings, *_ in _BRITISH for e in endings)


def _american(word: str) -> str:
    """``word`` with a British ending spelt the American way (a suffix test, not a regex: this
    runs once for every distinct word of the corpus)."""
    if not word.endswith(_BRITISH_ENDINGS):
        return word
    for endings, old, new, before in _BRITISH:
        if word.endswith(endings):
            at = word.rfind(old)
            if at >= before:
                return word[:at] + new + word[at + len(old) :]
    return word


class _Stemmers(threading.local):
    """One Snowball stemmer per thread: a stemmer keeps working state while it runs, and the
    index is built in a worker thread while queries run on the event loop."""

    def __init__(self) -> None:
        self.english = Stemmer.Stemmer("english", 0)  # 0: no cache, the vocabulary is the cache


_STEMMERS = _Stemmers()


def stem(word: str) -> str:
    """The term of one case-folded word. Pure and total: never returns an empty string."""
    if len(word) <= 3 or not word.isalpha():
        return word
    w = IRREGULAR.get(word, word)
    w = _american(w)
    if w[-1] == "s" and not _VOWEL.search(w, 0, len(w) - 1):
        w = w[:-1]  # the plural of an acronym (pdfs, csvs), which Snowball leaves alone
    s = _STEMMERS.english.stemWord(w)
    return DERIVED.get(s, s) or word


# ASCII text (nearly all skill text) is split with str.translate + str.split, several times
# faster than a Unicode regex; anything else goes through NFKC and the regex.
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


def _tokens(text: str) -> list[str]:
    """Runs of letters and digits, case preserved (camelCase is split later, per token)."""
    if text.isascii():
        return text.translate(_ASCII_SEPARATORS).split()
    return _WORD.findall(unicodedata.normalize("NFKC", text))


def _split_token(token: str) -> tuple[str, ...]:
    if token.islower() or token.isupper() or token.isdigit():
        return (token.casefold(),)
    return tuple(part.casefold() for part in _CAMEL.split(token) if part)


def words(text: str) -> Iterator[str]:
    """Case-folded words of ``text``, split on punctuation, hyphens, underscores and camelCase."""
    for token in _tokens(text):
        yield from _split_token(token)


def _term_of(word: str) -> str:
    return "" if word in STOP_WORDS or len(word) > MAX_TERM_CHARS else stem(word)


def terms(text: str) -> Iterator[str]:
    """Index terms of ``text``: words minus stop words, stemmed, bounded in length."""
    for w in words(text):
        term = _term_of(w)
        if term:
            yield term


# A related word as the query uses it: its term, the weight of the cue, the word as written.
_Related = tuple[str, float, str]


def _stemmed(related_words: str, weight: float) -> tuple[_Related, ...]:
    return tuple((t, weight, w) for w in related_words.split() if (t := _term_of(w)))


def _stemmed_tables() -> tuple[dict[str, tuple[_Related, ...]], dict[tuple[str, str], tuple[_Related, ...]]]:
    """``related.TABLE`` keyed by stemmed word and ``related.PHRASES`` by word pair, each with
    its related words stemmed and weighted (and kept as written, for the explanation)."""
    words_: dict[str, tuple[_Related, ...]] = {}
    for word, weight, rel in related.TABLE:
        words_[stem(word)] = words_.get(stem(word), ()) + _stemmed(rel, weight)
    phrases = {(a, b): _stemmed(rel, weight) for a, b, weight, rel in related.PHRASES}
    return words_, phrases


# Derived once from the constant tables (not a cache: they never change).
_RELATED, _PHRASES = _stemmed_tables()

MAX_RELATED = 0.9  # however many cues agree, a related word stays below a typed one


class QueryTerm(NamedTuple):
    """One term of a query. ``typed`` is what the person typed that brought it in (a word, or a
    two-word phrase for a phrase cue); ``word`` is the word that matches the term: ``typed``
    itself, or, when ``related``, the related word as the table writes it."""

    weight: float
    typed: str
    word: str
    related: bool = False

    def label(self, term: str) -> str:
        """How the term matched, in words that are true: ``pdf``, ``forms (stem form)``,
        ``test (related to tdd)``."""
        if self.related:
            return f"{self.word} (related to {self.typed})"
        return self.word if term == self.word else f"{self.word} (stem {term})"


def query_terms(query: str) -> dict[str, QueryTerm]:
    """Map each query term to its ``QueryTerm`` (weight, typed word, matching word), related
    words included.

    A term typed directly has weight 1.0, or less for a generic word, a word of an idiom or an
    irregular past form (``related``). A related word (``related.TABLE`` for one typed term,
    ``related.PHRASES`` for two typed words in a row, stop words included: "carry out") adds
    its terms at the weight the table gives; several cues for one term combine, and the result
    stays below MAX_RELATED, so a related word never reaches a typed one.
    """
    out: dict[str, QueryTerm] = {}
    all_words = [w for w in words(query) if len(w) <= MAX_TERM_CHARS]
    pairs = list(itertools.pairwise(all_words))
    idiom = {w for pair in pairs if pair in related.IDIOMS for w in pair}
    typed: list[tuple[str, str]] = []
    for w in all_words:
        if w not in STOP_WORDS:
            t = stem(w)
            typed.append((w, t))
            weight = (
                related.GENERIC if w in related.GENERIC_WORDS or w in idiom else related.PAST if w in IRREGULAR else 1.0
            )
            if t not in out or weight > out[t].weight:
                out[t] = QueryTerm(weight, w, w)
    suggested: list[tuple[str, tuple[_Related, ...]]] = [(w, _RELATED.get(t, ())) for w, t in typed]
    suggested += [(f"{a} {b}", _PHRASES[(a, b)]) for a, b in pairs if (a, b) in _PHRASES]
    # Cues are combined as independent evidence (noisy-or): "failing" and "know why" each
    # suggest debugging at 0.5, together at 0.75; still below a typed word.
    for source, rel in suggested:
        for term, weight, written in rel:
            had = out.get(term)
            had_weight = had.weight if had is not None else 0.0
            if had_weight >= 1.0:
                continue  # typed: never changed by a related word
            combined = min(round(1.0 - (1.0 - had_weight) * (1.0 - weight), 6), MAX_RELATED)
            # The explanation names the strongest cue: the one already there unless this is stronger.
            out[term] = (
                had._replace(weight=combined)
                if had is not None and had_weight > weight
                else QueryTerm(combined, source, written, related=True)
            )
    return out
