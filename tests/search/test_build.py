"""The fast index build equals the brute-force one (``reference_build``) bit for bit.

Rankings depend only on the postings (terms, doc ids, float32 scores) and the reasons on the
masks, sections and headings, so equal indexes mean equal search results for every query.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.catalog import build_catalog
from skill_mcp.config import load_settings
from skill_mcp.search import SearchDoc, SearchIndex, build_index, index_catalog
from skill_mcp.search.markdown import split_markdown, split_sections
from skill_mcp.search.source import docs_from_catalog
from skill_mcp.search.text import terms

from .reference_build import build_index as reference_build_index

CORPUS = Path(__file__).parent / "corpus"


def _assert_same(fast: SearchIndex, plain: SearchIndex) -> None:
    assert fast.names == plain.names
    assert fast.headings == plain.headings
    assert fast.postings.keys() == plain.postings.keys()
    for term, p in plain.postings.items():
        q = fast.postings[term]
        assert (q.docs, q.masks, q.sections, q.top) == (p.docs, p.masks, p.sections, p.top), term
        assert q.scores.tobytes() == p.scores.tobytes(), term  # bit for bit, not approximately
        assert q.impact == p.impact, term


@pytest.mark.slow
def test_the_test_corpus_indexes_exactly_as_the_reference_does() -> None:
    catalog = build_catalog(load_settings([str(CORPUS)], {}))
    _assert_same(index_catalog(catalog), reference_build_index(list(docs_from_catalog(catalog))))


_WORDS = [
    "pdf",
    "form",
    "forms",
    "Fill",
    "filling",
    "the",
    "and",
    "slackGif",
    "GIFs",
    "x_y",
    "naïve",
    "Straße",
    "deck",
    "AI",
    "ml2",
    "testing",
    "tests",
    "a" * 45,
    "über-cool",
    "fooBar",
    "FooBar",
    "foo",
]
_LINES = st.one_of(
    st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join),
    st.builds(
        lambda h, ws: h + " ".join(ws),
        st.sampled_from(["# ", "## ", "  ### ", "#", "####### ", "#\t"]),
        st.lists(st.sampled_from(_WORDS), max_size=4),
    ),
    st.sampled_from(["```", "~~~", "  ```sh", "```", "---", ""]),
    st.text(max_size=12),
)
_BODIES = st.builds(
    lambda lines, sep: sep.join(lines),
    st.lists(_LINES, max_size=25),
    st.sampled_from(["\n", "\n", "\r\n", "\n\n", "\x0c\n", "\u2028"]),
)
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join)


@st.composite
def _docs(draw: st.DrawFn) -> list[SearchDoc]:
    names = draw(
        st.lists(
            st.sampled_from(["pdf", "slack-gif", "form-filler", "deck", "foo-bar", "a1", "zz"]),
            min_size=1,
            max_size=7,
            unique=True,
        )
    )
    return [
        SearchDoc(
            name=n,
            title=draw(st.sampled_from(["", n, n.upper(), "Other Title"])),
            description=draw(_TEXT),
            tags=tuple(draw(st.lists(_TEXT, max_size=3))),
            body=draw(_BODIES),
        )
        for n in names
    ]


@pytest.mark.slow
@given(_docs())
def test_any_corpus_indexes_exactly_as_the_reference_does(docs: list[SearchDoc]) -> None:
    _assert_same(build_index(docs), reference_build_index(docs))


@given(_BODIES)
def test_fast_section_split_gives_the_same_headings_and_words(body: str) -> None:
    fast_heads, fast_texts = split_sections(body)
    heads, texts = split_markdown(body)
    assert fast_heads == heads
    assert [list(terms(t)) for t in fast_texts] == [list(terms(t)) for t in texts]


def test_a_term_first_met_in_the_preamble_points_to_no_section() -> None:
    index = build_index([SearchDoc("a", body="intro word\n# Head\nword and more\n## Two\nlater\n")])
    hit = index.search("word later", 1)[0]
    assert hit.section == "Two"  # "word" first occurs before any heading; "later" under "Two"
    assert build_index([SearchDoc("a", body="intro word\n# Head\nword\n")]).search("word", 1)[0].section is None


def _body_or_error(read, skill):
    try:
        return read(skill)
    except Exception as exc:
        return type(exc)


def test_the_body_read_for_indexing_is_the_body_read_body_gives() -> None:
    from skill_mcp.catalog.files import read_body
    from skill_mcp.search.source import _body

    catalog = build_catalog(load_settings([str(CORPUS)], {}))
    assert catalog.skills
    for skill in catalog.skills.values():
        assert _body(skill)[0] == read_body(skill)  # [1]: the stamp of the file read


def test_a_skill_md_changed_since_the_scan_is_read_as_read_body_reads_it(tmp_path: Path) -> None:
    from skill_mcp.catalog.files import read_body
    from skill_mcp.search.source import _body

    md = tmp_path / "demo" / "SKILL.md"
    md.parent.mkdir()
    md.write_text("---\nname: demo\ndescription: Demo things. Use when testing.\n---\n# Steps\nDo it.\n")
    skill = build_catalog(load_settings([str(tmp_path)], {})).skills["demo"]
    for changed in (
        "---\nname: demo\ndescription: A longer description now. Use when testing.\n---\n# New\nx\n",
        "---\nname: demo\n---\n# Short\ny\n",
        "no frontmatter at all\n",
        "---\nname: d\n",
    ):
        md.write_text(changed)
        assert _body_or_error(lambda s: _body(s)[0], skill) == _body_or_error(read_body, skill), changed
