"""Normalisation tables: splitting, case folding, stop words and the light stemmer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.search.text import query_terms, stem, terms, words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("slack-gif-creator", ["slack", "gif", "creator"]),
        ("fill_form", ["fill", "form"]),
        ("PDF/DOCX", ["pdf", "docx"]),
        ("camelCaseName", ["camel", "case", "name"]),
        ("ＰＤＦ", ["pdf"]),  # full-width letters fold through NFKC
        ("Straße", ["strasse"]),  # case folding, not lower()
        ("p5.js", ["p5", "js"]),
    ],
)
def test_words_split_on_punctuation_hyphens_underscores_and_case(text: str, expected: list[str]) -> None:
    assert list(words(text)) == expected


@pytest.mark.parametrize(
    ("group"),
    [
        ("animated", "animation", "animate", "animates"),
        ("test", "tests", "testing", "tested"),
        ("create", "creating", "created"),
        ("spreadsheet", "spreadsheets"),
        ("policy", "policies"),
        ("form", "forms"),
        ("slide", "slides"),
    ],
)
def test_stemmer_joins_the_forms_of_one_word(group: tuple[str, ...]) -> None:
    assert len({stem(w) for w in group}) == 1


@pytest.mark.parametrize("word", ["pdf", "gif", "css", "status", "analysis", "class"])
def test_stemmer_leaves_short_words_and_s_endings_that_are_not_plurals(word: str) -> None:
    assert stem(word) in (word, word.rstrip("s"))
    assert stem("status") == "status"
    assert stem("class") == "class"


def test_stop_words_are_dropped_from_terms() -> None:
    assert list(terms("how do I fill in a form for my team")) == ["fill", "form", "team"]


def test_query_terms_add_aliases_at_reduced_weight_and_keep_what_was_typed() -> None:
    q = query_terms("budget in excel")
    assert q["excel"] == (1.0, "excel")
    assert q["xlsx"][0] < 1.0 and q["xlsx"][1] == "excel"
    typed_and_alias = query_terms("excel xlsx")
    assert typed_and_alias["xlsx"][0] == 1.0  # a typed word is never downgraded to an alias


@given(st.text(max_size=200))
def test_terms_are_total_nonempty_and_lowercase(text: str) -> None:
    for t in terms(text):
        assert t and t == t.casefold() and len(t) <= 40


@given(st.text(max_size=300))
def test_the_fast_counter_agrees_with_the_reference_term_stream(text: str) -> None:
    from collections import Counter

    from .reference_build import TermCounter

    assert TermCounter().count(text) == Counter(terms(text))


@given(st.lists(st.text(max_size=80), max_size=5))
def test_section_counts_equal_the_counts_of_the_joined_text(texts: list[str]) -> None:
    from collections import Counter

    from .reference_build import TermCounter

    counts, first = TermCounter().count_sections(texts)
    assert counts == Counter(t for text in texts for t in terms(text))
    for term, i in first.items():
        assert term in set(terms(texts[i])) and all(term not in set(terms(x)) for x in texts[:i])
