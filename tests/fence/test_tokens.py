"""Confirm tokens: bound to the exact plan, used once, expiring on an injected clock."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import pytest

from skill_mcp.errors import SkillMcpError
from skill_mcp.models import ScriptDecl
from skill_mcp.reasons import Refusal
from skill_mcp.runner.tokens import TokenBook

from .helpers import catalog_of, make_runner, make_skill


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def check_reason(book: TokenBook, token: object, plan: bytes) -> Refusal:
    with pytest.raises(SkillMcpError) as info:
        book.check(token, plan)
    return info.value.reason


def test_a_token_checks_against_the_plan_it_was_minted_for() -> None:
    book = TokenBook(clock=Clock())
    token = book.mint(b'{"a":1}')
    assert book.check(token, b'{"a":1}')  # positive control
    assert check_reason(book, token, b'{"a":2}') == Refusal.DRAFT_CHANGED


def test_a_spent_token_is_reused() -> None:
    book = TokenBook(clock=Clock())
    token = book.mint(b"p")
    book.spend(book.check(token, b"p"), token)
    assert check_reason(book, token, b"p") == Refusal.TOKEN_REUSED


def test_a_token_expires_on_the_injected_clock() -> None:
    clock = Clock()
    book = TokenBook(clock=clock, ttl_s=60)
    token = book.mint(b"p")
    clock.now += 59
    book.check(token, b"p")
    clock.now += 1
    assert check_reason(book, token, b"p") == Refusal.TOKEN_EXPIRED


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "!!!.???", 42, None, "x" * 5000])
def test_malformed_tokens_are_invalid(token: object) -> None:
    assert check_reason(TokenBook(), token, b"p") == Refusal.TOKEN_INVALID


def test_a_token_from_another_process_key_is_invalid() -> None:
    token = TokenBook().mint(b"p")
    assert check_reason(TokenBook(), token, b"p") == Refusal.TOKEN_INVALID


def test_a_token_from_another_process_says_where_it_came_from_and_how_to_confirm() -> None:
    token = TokenBook().mint(b"p")
    with pytest.raises(SkillMcpError) as info:
        TokenBook().check(token, b"p")
    assert info.value.reason == Refusal.TOKEN_INVALID
    assert info.value.data == {"mintedBy": "another-process"}
    assert "another server process" in info.value.detail and "elicitation" in info.value.detail


def test_the_other_process_wording_never_lets_a_token_pass() -> None:
    # A payload re-signed with nothing but a foreign key id is still refused, and a token
    # naming this book's own key id with a bad MAC is only "malformed" (no other-process story).
    book = TokenBook(clock=Clock())
    body, mac = book.mint(b"p").split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=="))
    for key_id, story in ((payload["k"], False), ("0" * 16, True)):
        forged_payload = {**payload, "k": key_id, "exp": payload["exp"] + 1}
        forged = base64.urlsafe_b64encode(json.dumps(forged_payload).encode()).rstrip(b"=").decode() + "." + mac
        with pytest.raises(SkillMcpError) as info:
            book.check(forged, b"p")
        assert info.value.reason == Refusal.TOKEN_INVALID
        assert ("mintedBy" in info.value.data) is story
    assert book.check(book.mint(b"p"), b"p")  # positive control


def test_a_forged_payload_with_a_later_expiry_is_invalid() -> None:
    book = TokenBook(clock=Clock())
    body, mac = book.mint(b"p").split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=="))
    payload["exp"] += 10**6
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode() + "." + mac
    assert check_reason(book, forged, b"p") == Refusal.TOKEN_INVALID


def test_the_runner_token_flow_refuses_each_change(root: Path) -> None:
    skill = make_skill(
        root,
        "s",
        {"x.py": "print('v1')\n", "y.py": "print('y')\n"},
        [ScriptDecl("x.py", "python"), ScriptDecl("y.py", "python")],
    )
    catalog = catalog_of(skill)
    clock = Clock()
    runner = make_runner(clock=clock)

    async def main() -> None:
        token = runner.preview(runner.prepare(catalog, "s", "x.py", ["a"]))["confirmToken"]

        async def reason(script: str, args: list[str], tok: str = token) -> Refusal:
            with pytest.raises(SkillMcpError) as info:
                await runner.execute(runner.prepare(catalog, "s", script, args), token=tok)
            return info.value.reason

        assert await reason("x.py", ["b"]) == Refusal.DRAFT_CHANGED
        assert await reason("y.py", ["a"]) == Refusal.DRAFT_CHANGED
        assert await reason("x.py", ["a"], token + "x") == Refusal.TOKEN_INVALID
        (root / "s" / "x.py").write_text("print('v2')\n")  # changed between preview and run
        assert await reason("x.py", ["a"]) == Refusal.DRAFT_CHANGED
        (root / "s" / "x.py").write_text("print('v1')\n")
        result = await runner.execute(runner.prepare(catalog, "s", "x.py", ["a"]), token=token)
        assert result["status"] == "ok" and result["stdout"] == "v1\n"
        assert await reason("x.py", ["a"]) == Refusal.TOKEN_REUSED
        late = runner.preview(runner.prepare(catalog, "s", "x.py", []))["confirmToken"]
        clock.now += 3600
        assert await reason("x.py", [], late) == Refusal.TOKEN_EXPIRED

    anyio.run(main)


def test_a_preview_starts_no_process(root: Path) -> None:
    marker = root / "ran"
    skill = make_skill(root, "s", {"x.py": f"open({str(marker)!r}, 'w').close()\n"}, [ScriptDecl("x.py", "python")])
    runner = make_runner()
    out = runner.preview(runner.prepare(catalog_of(skill), "s", "x.py", []))
    assert out["status"] == "confirmation-required" and "willRun" in out["preview"]
    assert not marker.exists()
