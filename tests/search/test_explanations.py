"""A search explanation is true: each word it says matched in a field is in that field.

The reason used to name the word the person typed for every term that matched, so a related
word's match was reported as the typed one ("tdd" for a skill that says "test", "k8s" for one
that says "kubernetes"), and the fields of all terms were listed after all words, so a word
seemed to match in fields only another word was in. Now each term is named by the word that
matched and how (typed, by its stem, or related to a typed word), with that term's own fields.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from skill_mcp.config import load_settings
from skill_mcp.search import SearchDoc, build_index
from skill_mcp.search.index import Hit
from skill_mcp.search.markdown import split_markdown
from skill_mcp.search.text import terms
from skill_mcp.server import build_server

CORPUS = Path(__file__).parent / "corpus"
QUERIES = Path(__file__).parent / "queries.tsv"
_CLAIM = re.compile(r"^(?P<word>\S+)(?: \((?:stem (?P<stem>\S+)|related to (?P<typed>.+))\))?$")

# Typed words, their other forms, and words of the related-word tables (tdd -> test first,
# k8s -> kubernetes, excel -> xlsx spreadsheet, failing -> debug, carry out -> execute).
_WORDS = [
    "test",
    "tests",
    "testing",
    "first",
    "tdd",
    "kubernetes",
    "k8s",
    "deploy",
    "deployment",
    "cluster",
    "excel",
    "xlsx",
    "spreadsheet",
    "spreadsheets",
    "failing",
    "failure",
    "debug",
    "debugging",
    "carry",
    "out",
    "execute",
    "plan",
    "forms",
    "form",
    "fill",
    "pdf",
    "pdfs",
    "airflow",
    "the",
    "and",
]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join)
_BODY = st.lists(st.one_of(_TEXT, _TEXT.map(lambda t: "## " + t)), max_size=8).map("\n".join)


def _fields(doc: SearchDoc) -> dict[str, str]:
    headings, _ = split_markdown(doc.body)
    return {
        "name": doc.name,
        "frontmatter name": doc.title,
        "description": doc.description,
        "tags": " ".join(doc.tags),
        "heading": " ".join(headings),
        "body": doc.body,
    }


def _false_claims(hit: Hit, doc: SearchDoc, query: str) -> list[str]:
    fields = _fields(doc)
    wrong = []
    typed_terms = set(terms(query))
    for label, where in hit.why:
        claim = _CLAIM.match(label)
        assert claim is not None, label
        term = next(iter(terms(claim["word"])), claim["word"])
        if claim["stem"] is not None:
            assert claim["stem"] == term, label
        if claim["typed"] is None:
            assert term in typed_terms, f"{label} is not a word of {query!r}"
        else:
            assert set(terms(claim["typed"])) <= typed_terms, f"{label}: {claim['typed']!r} was not typed"
        wrong += [f"{label} in {field}" for field in where if term not in set(terms(fields[field]))]
    return wrong


@st.composite
def _corpus(draw: st.DrawFn) -> list[SearchDoc]:
    names = draw(
        st.lists(
            st.sampled_from(
                [
                    "deploy-cluster-airflow",
                    "test-first",
                    "excel-budget",
                    "pdf-forms",
                    "debugging",
                    "plan-runner",
                    "kubernetes-reference",
                ]
            ),
            min_size=1,
            max_size=7,
            unique=True,
        )
    )
    return [
        SearchDoc(
            name=n,
            title=draw(st.sampled_from(["", "Other Title"])),
            description=draw(_TEXT),
            tags=tuple(draw(st.lists(_TEXT, max_size=2))),
            body=draw(_BODY),
        )
        for n in names
    ]


@given(_corpus(), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join))
def test_every_word_an_explanation_claims_occurs_in_each_field_it_names(docs: list[SearchDoc], query: str) -> None:
    index = build_index(docs)
    by_name = {d.name: d for d in docs}
    for hit in index.search(query, 10):
        assert hit.why, hit  # a hit always says why
        assert _false_claims(hit, by_name[hit.name], query) == []


def test_a_related_word_is_named_as_related_to_what_was_typed() -> None:
    docs = [
        SearchDoc(name="test-first", description="Write the failing test first."),
        SearchDoc(name="deploy-cluster-airflow", description="Deploy an Airflow cluster."),
    ]
    index = build_index(docs)
    tdd = index.search("tdd")[0]
    assert tdd.name == "test-first"
    assert "tdd in" not in tdd.reason and "test (related to tdd) in name, description" in tdd.reason
    assert tdd.matched == ("first", "test")
    k8s = index.search("kubernetes deploy")
    assert [h.name for h in k8s] == ["deploy-cluster-airflow"]
    assert k8s[0].reason == "matched deploy in name, description"  # kubernetes is not in it: not claimed
    forms = build_index([SearchDoc(name="pdf", description="Fill in forms.")]).search("filling form")[0]
    assert forms.reason == "matched filling (stem fill) in description; form in description"


@pytest.mark.slow
@pytest.mark.anyio
async def test_skill_search_explanations_hold_for_every_query_of_the_quality_set(era: str) -> None:
    """Through the real tool, over the search corpus: every hit of every query says only true things."""
    from skill_mcp.catalog import build_catalog
    from skill_mcp.search.source import docs_from_catalog

    settings_ = load_settings([str(CORPUS)], {})
    docs = list(docs_from_catalog(build_catalog(settings_)))
    index, by_name = build_index(docs), {d.name: d for d in docs}
    queries = [
        line.split("\t")[0]
        for line in QUERIES.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    checked = 0
    async with Client(build_server(settings_), mode=era) as client:
        for query in [*queries, "tdd", "k8s deploy", "excel budget"]:
            result = await client.call_tool("skill_search", {"query": query, "limit": 5})
            assert result.structured_content is not None
            hits = index.search(query, 5)
            assert [h["reason"] for h in result.structured_content["hits"]] == [h.reason for h in hits], query
            for hit in hits:
                assert _false_claims(hit, by_name[hit.name], query) == [], (query, hit.reason)
                checked += 1
    assert checked > 100
