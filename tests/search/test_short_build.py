"""The short index (``shortbuild``) equals what the general builder makes of the same skills
without bodies (the way ``short_index`` built it before: ``build_sorted(map(short_doc, ...))``),
bit for bit, and so ranks exactly as it did for every query.

Three checks: Hypothesis corpora with the awkward inputs (camelCase, stop words only, repeated
words, non-ASCII text and tags, the build's own separator character, numbers, long words,
frontmatter names equal to the name's words or not); a generated catalog of a few hundred
skills on disk (the bench generator) plus the labelled corpus, searched with a few hundred
queries, hits and scores compared exactly; and a planted-bug control showing the comparison
catches a one-word difference.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.corpus import WORDS, generate
from bench.corpus import queries as bench_queries
from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.models import Catalog
from skill_mcp.search import SearchDoc, SearchIndex, search_result, short_index
from skill_mcp.search.build import build_sorted
from skill_mcp.search.shortbuild import build_short
from skill_mcp.search.source import _fields, in_order, short_doc

from .quality import labelled

CORPUS = Path(__file__).parent / "corpus"
QUERIES = Path(__file__).parent / "queries.tsv"


def _previous(catalog: Catalog) -> SearchIndex:
    """The short index as ``short_index`` built it before ``shortbuild``."""
    return build_sorted(map(short_doc, in_order(catalog)))


def _assert_same(fast: SearchIndex, plain: SearchIndex) -> None:
    assert fast.names == plain.names
    assert list(fast.headings) == list(plain.headings)
    assert set(fast.postings) == set(plain.postings)
    assert len(fast.postings) == len(plain.postings)
    for term, p in plain.postings.items():
        assert term in fast.postings
        q = fast.postings[term]
        assert (q.docs, q.masks, q.sections, q.top) == (p.docs, p.masks, p.sections, p.top), term
        assert q.scores.tobytes() == p.scores.tobytes(), term  # bit for bit, not approximately
        assert q.impact == p.impact, term
    assert "no-such-term" not in fast.postings and fast.postings.get("no-such-term") is None


def _differences(a: SearchIndex, b: SearchIndex, queries: list[str]) -> list[str]:
    """The queries whose hits differ in any way (skills, order, scores, fields, words, reasons)."""
    return [q for q in queries if a.search(q, 20) != b.search(q, 20)]


def _rows(docs: list[SearchDoc]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(d.name, d.title, d.description, d.tags) for d in sorted(docs, key=lambda d: d.name)]


_WORDS = [
    "pdf",
    "PDFs",
    "form",
    "forms",
    "Fill",
    "filling",
    "the",
    "and",
    "of",
    "slackGif",
    "fooBar",
    "FooBar",
    "XMLHttp",
    "GIFs",
    "x_y",
    "naïve",
    "Straße",
    "über-cool",
    "ﬁle",  # a ligature NFKC splits
    "e\u0301",  # a combining mark
    "—",
    "\x1f",  # the separator the build joins texts with
    "deck",
    "AI",
    "ml2",
    "2024",
    "0042",
    "１２",  # full-width digits
    "testing",
    "tests",
    "colour",
    "a" * 45,
    "1" * 45,
    "let's",
    "",
]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join)


@st.composite
def _docs(draw: st.DrawFn) -> list[SearchDoc]:
    names = draw(
        st.lists(
            st.sampled_from(["pdf", "slack-gif", "form-filler", "deck", "foo-bar", "a1", "zz", "the-and", "x"]),
            min_size=1,
            max_size=8,
            unique=True,
        )
    )
    return [
        SearchDoc(
            name=n,
            title=draw(st.sampled_from(["", n, n.upper(), n.replace("-", " "), "Other Title", "the"]) | _TEXT),
            description=draw(_TEXT),
            tags=tuple(draw(st.lists(_TEXT, max_size=4))),
        )
        for n in names
    ]


@settings(max_examples=300)
@given(_docs())
def test_any_skills_index_exactly_as_the_general_builder_indexes_them_without_bodies(docs: list[SearchDoc]) -> None:
    _assert_same(build_short(_rows(docs)), build_sorted(sorted(docs, key=lambda d: d.name)))


def test_no_skills_and_skills_of_stop_words_only() -> None:
    _assert_same(build_short([]), build_sorted([]))
    docs = [SearchDoc("the", title="and", description="of the", tags=("a", "an the"))]
    _assert_same(build_short(_rows(docs)), build_sorted(docs))


def _queries(rng: random.Random) -> list[str]:
    typed = [q for q, _ in labelled(QUERIES)]
    made = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(300)]
    return typed + list(bench_queries()) + made + ["", "the and of", "pdf", "zzzz-unknown"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("generated") / "skills"
    generate(root, 300)
    return build_catalog(load_settings([str(root), str(CORPUS)], {"SKILL_MCP_CACHE": "off"}))


def test_a_generated_catalog_ranks_exactly_as_before_for_every_query(generated: Catalog) -> None:
    assert len(generated.skills) > 300
    new, old = short_index(generated), _previous(generated)
    queries = _queries(random.Random(29))
    assert _differences(new, old, queries) == []
    # And the answers the tool gives from them (confidence, match) are the same.
    for query in queries[::10]:
        ours = search_result(generated, new, query, 10, complete=False)
        theirs = search_result(generated, old, query, 10, complete=False)
        assert ours == theirs
    _assert_same(new, old)


def test_the_comparison_sees_a_one_word_difference(generated: Catalog) -> None:
    """Planted-bug control: one skill's description loses one word in the new build."""
    rows = list(map(_fields, in_order(generated)))
    i = next(i for i, row in enumerate(rows) if "pdf" in row[2].split())
    name, title, description, tags = rows[i]
    rows[i] = (name, title, description.replace("pdf", "", 1), tags)
    planted = build_short(rows)
    differing = _differences(planted, _previous(generated), ["pdf", "fill a pdf form", *_queries(random.Random(29))])
    assert "pdf" in differing


def test_a_query_reads_only_the_terms_it_names(generated: Catalog) -> None:
    index = short_index(generated)
    index.search("pdf form", 5)
    made = index.postings._made  # type: ignore[attr-defined]
    assert set(made) == {"pdf", "form"}
    assert made["pdf"] is index.postings["pdf"]  # made once, then kept
