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


@pytest.mark.parametrize(
    ("group"),
    [
        ("feature", "features"),
        ("failing", "failure", "failed", "fails"),
        ("execute", "executing", "execution"),
        ("generate", "generative", "generation"),
        ("organise", "organize", "organisation", "organization"),
        ("colour", "color", "colours"),
        ("analyse", "analyze", "analysis", "analyses"),
        ("summary", "summarise", "summarize"),
        ("debug", "debugging", "debugger"),
        ("write", "wrote", "written"),
        ("break", "broke", "broken"),
        ("worktree", "worktrees"),
        ("build", "builder", "builders"),  # agent nouns of skill names
        ("create", "creator", "creating"),
    ],
)
def test_morphology_joins_inflections_derivations_british_spellings_and_irregular_forms(group: tuple[str, ...]) -> None:
    assert len({stem(w) for w in group}) == 1, {w: stem(w) for w in group}


@pytest.mark.parametrize(("a", "b"), [("pdf", "pdfs"), ("status", "statuses"), ("class", "classes"), ("news", "new")])
def test_stemmer_keeps_short_words_and_does_not_merge_unrelated_ones(a: str, b: str) -> None:
    assert stem("pdf") == "pdf" and stem("css") == "css"
    assert (stem(a) == stem(b)) == (a != "news")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("let's think", ["think"]),  # never a stray "s"
        ("Let’s go", ["go"]),  # a typographic apostrophe too
        ("I don't know why it's failing", ["know", "fail"]),
        ("we're done, I've checked, I'll merge, you'd see, can't won't", ["done", "check", "merg", "see"]),
        ("anthropic's brand", ["anthrop", "brand"]),  # a possessive leaves the noun
    ],
)
def test_contractions_and_possessives_leave_no_fragment_terms(text: str, expected: list[str]) -> None:
    assert list(terms(text)) == expected


def test_stop_words_are_dropped_from_terms() -> None:
    assert list(terms("how do I fill in a form for my team")) == ["fill", "form", "team"]


def test_query_terms_add_aliases_at_reduced_weight_and_keep_what_was_typed() -> None:
    q = query_terms("budget in excel")
    assert q["excel"] == (1.0, "excel", "excel", False)
    assert q["xlsx"][0] < 1.0 and q["xlsx"][1:] == ("excel", "xlsx", True)
    typed_and_alias = query_terms("excel xlsx")
    assert typed_and_alias["xlsx"][0] == 1.0  # a typed word is never downgraded to an alias


def test_phrases_add_related_words_and_idioms_and_generic_words_count_less() -> None:
    q = query_terms("carry out the plan we wrote")
    assert q[stem("execute")] == (0.8, "carry out", "execute", True)  # a two-word phrase, stop word included
    assert q["plan"] == (1.0, "plan", "plan", False)
    assert q[stem("carry")][0] < 0.5  # an idiom's words mean nothing alone
    assert q[stem("write")] == (0.5, "wrote", "wrote", False)  # a past form names what exists, not the task
    assert query_terms("think it through")[stem("think")][0] < 1.0  # generic words count less
    assert query_terms("my test keeps failing")[stem("debug")][1] == "failing"  # a symptom suggests its cure
    assert query_terms("second branch")[stem("worktree")][1] == "second branch"


def test_cues_for_one_related_word_combine_but_stay_below_a_typed_word() -> None:
    assert query_terms("my test keeps failing")[stem("debug")][0] == 0.5
    assert query_terms("my test keeps failing and I don't know why")[stem("debug")][0] == 0.75  # two cues
    many = query_terms("crash bug weird strange failing broken, no idea why, track it down")
    assert many[stem("debug")][0] == 0.9  # capped
    assert query_terms("debug this crash")[stem("debug")] == (1.0, "debug", "debug", False)  # typed stays typed


def test_every_related_word_is_a_term_and_no_entry_relates_a_word_to_itself() -> None:
    from skill_mcp.search import related

    for word, weight, rel in related.TABLE:
        assert 0 < weight < 1 and rel.split()
        assert all(list(terms(r)) for r in rel.split()), (word, rel)
        assert stem(word) not in {stem(r) for r in rel.split()}, word
    for a, b, weight, rel in related.PHRASES:
        assert 0 < weight < 1 and rel.split(), (a, b)


@given(st.text(max_size=200))
def test_terms_are_total_nonempty_and_lowercase(text: str) -> None:
    for t in terms(text):
        assert t and t == t.casefold() and len(t) <= 40
