"""``closest_names``: what a name that is not served may have meant."""

from __future__ import annotations

import pytest

from skill_mcp.surfaces.state import closest_names

NAMES = [
    "check-stdout-purity",
    "check-nftables-egress",
    "run-conformance-suite",
    "test-both-protocol-eras",
    "pass-secrets-via-environment",
    "connect-claude-code",
    "connect-claude-desktop",
    "connect-cursor",
]


@pytest.mark.parametrize(
    ("wanted", "first"),
    [
        ("stdout-purity-check", "check-stdout-purity"),  # words in another order
        ("protocol-conformance-test", "run-conformance-suite"),  # fewer words shared, but more alike
        ("secrets-via-environment", "pass-secrets-via-environment"),
        ("Connect-Claude", "connect-claude-code"),
    ],
)
def test_the_most_alike_name_sharing_a_word_comes_first(wanted: str, first: str) -> None:
    assert closest_names(NAMES, wanted)[0] == first


def test_a_name_sharing_no_word_suggests_nothing() -> None:
    assert closest_names(NAMES, "nope") == []
    assert closest_names(NAMES, "") == []
    assert closest_names([], "check-stdout-purity") == []


def test_at_most_limit_names_each_once() -> None:
    found = closest_names(NAMES, "connect", limit=2)
    assert len(found) == 2 and len(set(found)) == 2 and all(n.startswith("connect-") for n in found)


def test_a_typo_sharing_no_word_suggests_the_name_it_misspells() -> None:
    assert closest_names(["pdf", "docx", "pptx", "xlsx"], "pfd") == ["pdf"]


def test_a_one_letter_word_suggests_nothing() -> None:
    assert closest_names(["finishing-a-development-branch", "pdf"], "a") == []
