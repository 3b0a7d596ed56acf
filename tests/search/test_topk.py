"""The impact-ordered query gives exactly the hits of the brute-force query (``reference_search``).

Same names, same order, same scores, same matched words, fields and sections: ``Hit`` values
compare equal. Corpora here are built big enough, and from few enough words, that query terms
have long posting lists: impact heads, heads cut at ``HEAD``, heads picked through the
sampled cutoff, position tables and plateaus of equal scores all occur.
"""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import Hit, SearchDoc, SearchIndex, build_index, index_catalog
from skill_mcp.search.postings import DENSE_SHARE, FIRST_DEPTH, HEAD, impact_of
from skill_mcp.search.text import query_terms
from skill_mcp.search.topk import threshold

from .quality import labelled, measure
from .reference_search import search as reference_search

# Aliases (excel -> xlsx, spreadsheet; deck -> pptx, presentation, slide) put half-weight terms
# in queries; "the" is a stop word and "zzz" is in no skill.
_VOCAB = ["pdf", "form", "fill", "excel", "xlsx", "spreadsheet", "deck", "slide", "gif", "test", "web", "chart"]
_QUERY_WORDS = [*_VOCAB, "the", "zzz", "forms", "testing", "presentation"]


@st.composite
def _corpora(draw: st.DrawFn) -> list[SearchDoc]:
    """Skills drawn from a handful of templates, so many share every field but the name (ties)."""
    templates = draw(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(_VOCAB), max_size=5),
                st.lists(st.sampled_from(_VOCAB), max_size=12),
                st.lists(st.sampled_from(_VOCAB), max_size=2),
            ),
            min_size=1,
            max_size=8,
        )
    )
    n = draw(st.integers(min_value=FIRST_DEPTH + 1, max_value=HEAD + 150))
    rng = random.Random(draw(st.integers(min_value=0, max_value=2**32)))
    docs = []
    for i in range(n):
        description, body, tags = templates[rng.randrange(len(templates))]
        name = f"{rng.choice(_VOCAB)}-{i:04d}" if rng.random() < 0.3 else f"s{i:04d}"
        docs.append(
            SearchDoc(
                name,
                description=" ".join(description),
                tags=tuple(tags),
                body=f"# {rng.choice(_VOCAB)}\n" + " ".join(body),
            )
        )
    return docs


_QUERIES = st.lists(st.sampled_from(_QUERY_WORDS), min_size=1, max_size=10).map(" ".join)


@given(_corpora(), st.lists(_QUERIES, min_size=1, max_size=5), st.integers(min_value=1, max_value=50))
def test_any_query_gets_exactly_the_hits_the_plain_query_gives(docs, queries, limit) -> None:
    index = build_index(docs)
    for query in queries:
        assert index.search(query, limit) == reference_search(index, query, limit), query


def _zipf_corpus(n: int, seed: int) -> list[SearchDoc]:
    """Skills shaped like the bench corpus: verb-word names, descriptions of domain words,
    bodies of Zipf-distributed words with headings, so lists run to thousands of postings."""
    rng = random.Random(seed)
    verbs = ["create", "check", "convert", "plan", "test", "fix"]
    words = ["chart", "task", "zip", "yaml", "export", "cloud", "lint", "wiki", "pdf", "deck", "excel", "form"]
    filler = [f"w{i}" for i in range(300)]
    weights = [1 / (r + 1) for r in range(len(filler))]
    docs = []
    for i in range(n):
        body = []
        for _ in range(rng.randint(1, 4)):
            body.append(f"## {rng.choice(verbs)} the {rng.choice(words)}")
            body.append(" ".join([*rng.choices(filler, weights, k=rng.randint(10, 60)), rng.choice(words)]))
        docs.append(
            SearchDoc(
                f"{rng.choice(verbs)}-{rng.choice(words)}-{i:05d}",
                description=f"{rng.choice(verbs)} {' '.join(rng.sample(words, 4))}",
                tags=tuple(rng.sample(words, 2)),
                body="\n".join(body),
            )
        )
    return docs


@pytest.fixture(scope="module")
def big() -> SearchIndex:
    return build_index(_zipf_corpus(2500, seed=8))


def _big_queries() -> list[str]:
    rng = random.Random(3)
    verbs = ["create", "check", "convert", "plan", "test", "fix", "review"]
    words = [
        "chart",
        "task",
        "zip",
        "yaml",
        "export",
        "cloud",
        "lint",
        "wiki",
        "pdf",
        "deck",
        "excel",
        "form",
        "w0",
        "w3",
    ]
    return [" ".join([rng.choice(verbs), *rng.sample(words, rng.randint(0, 3))]) for _ in range(120)]


@pytest.mark.slow
def test_the_big_corpus_has_every_kind_of_head(big: SearchIndex) -> None:
    lengths = {len(p.docs) for p in big.postings.values() if p.impact is not None}
    assert max(lengths) > 4 * HEAD  # a head picked through the sampled cutoff
    assert any(HEAD < n <= 4 * HEAD for n in lengths)  # a head cut at HEAD, sorted whole
    assert any(p.impact is not None and p.impact.where is not None for p in big.postings.values())
    assert any(p.impact is None for p in big.postings.values())


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1, 3, 10, 50])
def test_queries_over_long_lists_get_exactly_the_plain_hits(big: SearchIndex, limit: int) -> None:
    for query in _big_queries():
        assert big.search(query, limit) == reference_search(big, query, limit), query


def test_queries_over_long_lists_are_answered_from_the_heads(big: SearchIndex) -> None:
    # Not a speed test: the proof that the heads, not the exhaustive fallback, answer the
    # typical query (a fallback would still be exact, only slower).
    answered = 0
    queries = _big_queries()
    for query in queries:
        q = query_terms(query)
        present = [(t, q[t][0], p) for t in sorted(q) if (p := big.postings.get(t)) is not None]
        present.sort(key=lambda x: (-x[1] * x[2].top, x[0]))
        answered += threshold([(w, p) for _, w, p in present], 10) is not None
    assert answered >= 0.9 * len(queries)


_SCORES = st.lists(
    st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.5]) | st.floats(0.015625, 20.0, width=32), min_size=1, max_size=5 * HEAD
)


@given(_SCORES, st.integers(min_value=0, max_value=3))
def test_a_head_is_a_prefix_of_the_score_order_and_rest_bounds_the_others(values, spread) -> None:
    scores = array("f", values)
    docs = array("I", range(0, len(values) * (spread + 1), spread + 1))
    n_docs = docs[-1] + 1 + spread
    imp = impact_of(docs, scores, n_docs)
    if len(docs) <= FIRST_DEPTH:
        assert imp is None
        return
    assert imp is not None
    order = sorted(range(len(docs)), key=lambda i: (-scores[i], docs[i]))
    k = len(imp.docs)
    assert 0 < k <= HEAD
    assert list(imp.docs) == [docs[i] for i in order[:k]]
    assert list(imp.scores) == [scores[i] for i in order[:k]]
    left = [scores[i] for i in order[k:]]
    assert imp.rest >= max(left, default=0.0) and (imp.rest == 0.0) == (not left)
    assert imp.rest <= imp.scores[-1]
    if imp.where is None:
        assert len(docs) <= HEAD or len(docs) * DENSE_SHARE < n_docs
    else:
        assert len(imp.where) == n_docs
        assert [imp.where[d] for d in docs] == list(range(1, len(docs) + 1))
        assert sum(1 for p in imp.where if p) == len(docs)


_TESTS = Path(__file__).parent.parent


@pytest.mark.parametrize(
    ("roots", "sets"),
    [
        ([str(_TESTS / "search" / "corpus")], ["search/queries.tsv"]),
        ([], ["pack/queries.tsv", "pack/queries-heldout.tsv"]),  # the bundled pack
    ],
)
def test_the_labelled_query_sets_rank_exactly_as_the_plain_query_does(roots: list[str], sets: list[str]) -> None:
    index = index_catalog(build_catalog(load_settings(roots, {})))
    for name in sets:
        rows = labelled(_TESTS / name)
        for query, _ in rows:
            for limit in (1, 3, 10):
                assert index.search(query, limit) == reference_search(index, query, limit), query

        class Plain:
            def search(self, query: str, limit: int) -> list[Hit]:
                return reference_search(index, query, limit)

        assert measure(index, rows) == measure(Plain(), rows)  # hit@1, hit@3, MRR and misses
