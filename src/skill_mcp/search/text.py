"""Text normalisation shared by indexing and querying: one function turns text into terms.

The pipeline is deliberately small and deterministic (no model, no download, no locale):

1. Unicode NFKC, then case folding.
2. Split on anything that is not a letter or digit, so ``slack-gif-creator``,
   ``fill_form`` and ``pdf/docx`` become separate words; camelCase is split too.
3. Drop stop words (function words a person types around the words that matter).
4. A light suffix stemmer (plural, ``-ing``, ``-ed``, ``-ion``, ``-er``, ``-ly``, final ``e``)
   so ``animated``, ``animation`` and ``animate`` meet, as do ``tests`` and ``testing``.

``expand_query`` adds a handful of well-known aliases (``excel`` -> ``xlsx``/``spreadsheet``,
``powerpoint`` -> ``pptx``/``slide``) at reduced weight: people name a format by its product,
skills name it by its extension, and no amount of stemming joins the two.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
MAX_TERM_CHARS = 40

STOP_WORDS = frozenset(
    ["a", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do", "does", "doing", "for", "from", "get", "got", "has", "have", "help", "how", "i", "i'd", "i'm", "if", "in", "into", "is", "it", "its", "it's", "just", "let", "like", "me", "my", "need", "needs", "of", "on", "or", "our", "out", "please", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "this", "those", "to", "too", "up", "us", "via", "want", "wants", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "also", "about", "all", "should", "shall", "may", "might", "must", "very", "each", "other", "using", "use", "used", "uses"]
)

# People say the product, skills say the format. Each alias maps to terms added to the query
# at ALIAS_WEIGHT. Kept short on purpose: every entry is a claim about common usage, not
# about one corpus.
ALIASES: Mapping[str, tuple[str, ...]] = {
    "excel": ("xlsx", "spreadsheet"),
    "spreadsheet": ("xlsx",),
    "sheet": ("xlsx", "spreadsheet"),
    "csv": ("spreadsheet",),
    "workbook": ("xlsx", "spreadsheet"),
    "pivot": ("spreadsheet", "xlsx"),
    "formula": ("spreadsheet",),
    "word": ("docx", "document"),
    "powerpoint": ("pptx", "presentation", "slide"),
    "deck": ("pptx", "presentation", "slide"),
    "slide": ("pptx", "presentation"),
    "presentation": ("pptx", "slide"),
    "keynote": ("pptx", "presentation"),
    "acrobat": ("pdf",),
    "gif": ("animat",),
    "emoji": ("gif",),
    "browser": ("playwright", "web"),
    "website": ("web", "frontend", "html"),
    "webpage": ("web", "frontend", "html"),
    "site": ("web",),
    "poster": ("design", "visual"),
    "newsletter": ("communicat", "announcement"),
    "memo": ("communicat", "announcement"),
    "generative": ("algorithm", "art"),
    "p5": ("generative", "algorithm"),
    "font": ("typography",),
    "colour": ("color",),
    "logo": ("brand",),
}
ALIAS_WEIGHT = 0.5

_SUFFIXES_KEEP_S = ("ss", "us", "is", "ous")


def _strip_double(word: str) -> str:
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


def stem(word: str) -> str:
    """Light English suffix stripping. Pure and total: never returns an empty string."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(_SUFFIXES_KEEP_S):
        w = w[:-1]
    for suffix, min_len in (("ing", 6), ("ed", 5), ("ion", 6), ("ly", 5), ("er", 5)):
        if w.endswith(suffix) and len(w) >= min_len:
            w = _strip_double(w[: -len(suffix)])
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w or word


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


# Derived once from the constant table above (not a cache: it never changes).
_ALIASES_BY_STEM: Mapping[str, tuple[str, ...]] = {stem(k): v for k, v in ALIASES.items()}


def query_terms(query: str) -> dict[str, tuple[float, str]]:
    """Map each query term to (weight, the word the person typed), aliases included.

    A term typed directly has weight 1.0; an alias adds ALIAS_WEIGHT unless the term was typed.
    """
    out: dict[str, tuple[float, str]] = {}
    typed: list[tuple[str, str]] = []
    for w in words(query):
        if w in STOP_WORDS or len(w) > MAX_TERM_CHARS:
            continue
        t = stem(w)
        typed.append((w, t))
        out[t] = (1.0, w)
    for w, t in typed:
        for alias in ALIASES.get(w) or _ALIASES_BY_STEM.get(t, ()):
            a = stem(alias)
            if a not in out:
                out[a] = (ALIAS_WEIGHT, w)
    return out
