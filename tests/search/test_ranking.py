"""Ranking tables over small hand-made corpora: fields, weights, ties, limits, reasons."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.search import SearchDoc, build_index


def _names(index, query, limit=10):
    return [h.name for h in index.search(query, limit)]


CORPUS = [
    SearchDoc("pdf", "pdf", "Read, merge and fill in PDF forms.", body="# Forms\nUse fill_fields.py."),
    SearchDoc("xlsx", "xlsx", "Spreadsheets with formulas.", body="# Charts\nopenpyxl charts."),
    SearchDoc("notes", "notes", "Keep meeting notes.", tags=("pdf-export",), body="Write notes."),
    SearchDoc("gif-maker", "gif-maker", "Animated images for chat.", body="# Frames\nAnimate frames."),
]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("pdf", "pdf"),  # name beats a tag mention
        ("fill form", "pdf"),
        ("formula", "xlsx"),  # description, stemmed
        ("openpyxl", "xlsx"),  # body only
        ("charts", "xlsx"),  # heading
        ("meeting", "notes"),
        ("export", "notes"),  # tags only
        ("animation", "gif-maker"),  # stemmed
        ("GIF", "gif-maker"),  # case folded, hyphen split
        ("Excel workbook", "xlsx"),  # alias
    ],
)
def test_each_field_can_carry_a_match(query: str, first: str) -> None:
    assert _names(build_index(CORPUS), query)[0] == first


def test_name_outranks_body_for_the_same_word() -> None:
    docs = [
        SearchDoc("alpha", description="about things", body="kafka " * 3),
        SearchDoc("kafka", description="about things", body="other words"),
    ]
    assert _names(build_index(docs), "kafka") == ["kafka", "alpha"]


def test_ties_are_broken_by_name_whatever_the_input_order() -> None:
    docs = [SearchDoc(n, description="same words here") for n in ("zeta", "alpha", "mid")]
    assert _names(build_index(docs), "words") == ["alpha", "mid", "zeta"]
    assert _names(build_index(reversed(docs)), "words") == ["alpha", "mid", "zeta"]


def test_same_query_same_corpus_same_scores() -> None:
    a = build_index(CORPUS).search("fill a pdf form with charts", 4)
    b = build_index(list(reversed(CORPUS))).search("fill a pdf form with charts", 4)
    assert a == b


def test_limit_is_respected_and_no_match_gives_nothing() -> None:
    index = build_index(CORPUS)
    assert len(index.search("pdf notes charts frames", 2)) == 2
    assert index.search("pdf", 0) == []
    assert index.search("zzzz unknownword", 10) == []
    assert index.search("the and of", 10) == []  # stop words only


def test_hit_reason_names_the_words_fields_and_section() -> None:
    hit = build_index(CORPUS).search("fill in a form", 1)[0]
    assert hit.name == "pdf"
    assert set(hit.matched) == {"fill", "form"}
    assert "description" in hit.fields and "heading" in hit.fields
    assert hit.section == "Forms"
    assert "fill" in hit.reason and "Forms" in hit.reason


def test_headings_inside_code_fences_are_not_headings() -> None:
    doc = SearchDoc("sh", body="# Real\n```sh\n# not a heading\n```\n")
    index = build_index([doc])
    assert index.headings == (("Real",),)


def test_index_keeps_no_body_text() -> None:
    index = build_index([SearchDoc("a", body="secretword " * 50 + "\n# Head\n")])
    assert "secretword" in index.postings  # as a term with a number, not as text
    assert not any("secretword" in h for hs in index.headings for h in hs)


def _exhaustive(index, query, limit):
    """Score every skill the slow way, straight from the postings, for comparison."""
    from skill_mcp.search.text import query_terms

    acc: dict[int, float] = {}
    q = query_terms(query)
    for term in sorted(q, key=lambda t: (-q[t][0] * index.postings[t].top, t) if t in index.postings else (0, t)):
        post = index.postings.get(term)
        if post is None:
            continue
        for doc, score in zip(post.docs, post.scores, strict=True):
            acc[doc] = acc.get(doc, 0.0) + q[term][0] * score
    ranked = sorted(acc.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))[:limit]
    return [index.names[d] for d, _ in ranked]


_VOCAB = ["alpha", "beta", "gamma", "delta", "pdf", "form", "slack", "gif", "test", "web", "excel", "deck"]


@given(
    st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=30), min_size=1, max_size=40),
    st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=5),
    st.integers(min_value=1, max_value=6),
)
def test_pruned_search_returns_exactly_the_exhaustive_ranking(bodies, query, limit) -> None:
    docs = [SearchDoc(f"s{i:03d}", description=" ".join(b[:3]), body=" ".join(b)) for i, b in enumerate(bodies)]
    index = build_index(docs)
    q = " ".join(query)
    assert [h.name for h in index.search(q, limit)] == _exhaustive(index, q, limit)


def _reference_body() -> str:
    """A 74 KB reference-style body that uses every generic word many times."""
    para = (
        "Before you call the client, think through the request and work through the steps; "
        "build the payload, test it, plan the retries, then review the response. "
    )
    sections = [
        f"## Method {i}\n\n{para * 3}`client.method_{i}(name, timeout)` sets the endpoint.\n" for i in range(150)
    ]
    return "# API reference\n\n" + "\n".join(sections)


def test_a_large_reference_does_not_win_on_generic_words() -> None:
    body = _reference_body()
    assert len(body) > 70_000
    docs = [
        SearchDoc("api-reference", description="Reference for the Example API client.", body=body),
        SearchDoc(
            "brainstorming",
            description="Think a design through with the user before anything is built.",
            body="# Ask\nOne question at a time.\n# Options\nTwo or three approaches.",
        ),
        SearchDoc("pdf", description="Fill in PDF forms.", body="# Forms\nfill_fields.py"),
    ]
    index = build_index(docs)
    assert _names(index, "let's think through the design before we build it")[0] == "brainstorming"
    assert _names(index, "think it through before building")[0] == "brainstorming"
    # Positive control: a word only the reference has still finds it.
    assert _names(index, "method_42 timeout")[0] == "api-reference"
