"""Confirm tokens: a token is bound to one exact ``willRun`` and runs it once.

``token = b64url(payload) "." b64url(HMAC-SHA256(key, payload))`` where ``payload`` is the
canonical JSON ``{"v": 1, "plan": sha256(canonical willRun), "exp": <unix s>, "n": <nonce>,
"k": <key id>}``. The key is random per process, so a token never outlives the server that
minted it. The key id is a one-way digest of the key: it lets a refusal say "minted by another
server process" (a client that starts one server per call meets exactly that) instead of
"malformed". It only chooses the words of a refusal, never whether a token passes: the MAC
decides that, and a forged ``k`` buys a forger nothing but the other message.

Checks, in order: the shape and the MAC (``TOKEN_INVALID``), the nonce already spent
(``TOKEN_REUSED``), the expiry against the injected clock (``TOKEN_EXPIRED``), the plan the
repeat call would run against the one previewed (``DRAFT_CHANGED``). A nonce is spent only
when a run is about to start, so a refused repeat call does not burn the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from skill_mcp.errors import SkillMcpError
from skill_mcp.reasons import Refusal

DEFAULT_TTL_S = 600
MAX_TOKEN_CHARS = 1024
MAX_SPENT = 4096  # spent nonces kept until they expire; past this the oldest expired are dropped
KEY_ID_CHARS = 16
OTHER_PROCESS = (
    "the confirm token was minted by another server process: each server process has its own key, so a "
    "token is accepted only by the process that showed the preview. Keep the preview and the confirmation "
    "in one session with one server process (a client that starts a new server for every call cannot "
    "confirm this way), or use a client that answers the confirmation prompt (form elicitation)"
)


def key_id(key: bytes) -> str:
    """A public name for ``key``: a domain-separated SHA-256, so it reveals nothing of the key."""
    return hashlib.sha256(b"skill-mcp confirm-token key id\0" + key).hexdigest()[:KEY_ID_CHARS]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(slots=True)
class TokenBook:
    """Mints and checks tokens. Holds the per-process key and the spent nonces (not a record)."""

    clock: Callable[[], float] = time.time
    ttl_s: float = DEFAULT_TTL_S
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _spent: dict[str, float] = field(default_factory=dict, repr=False)

    def mint(self, canonical_plan: bytes) -> str:
        payload = json.dumps(
            {
                "v": 1,
                "plan": hashlib.sha256(canonical_plan).hexdigest(),
                "exp": int(self.clock() + self.ttl_s),
                "n": secrets.token_urlsafe(16),
                "k": key_id(self.key),
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        mac = hmac.new(self.key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def _open(self, token: object) -> dict[str, object]:
        invalid = SkillMcpError(Refusal.TOKEN_INVALID, "the confirm token is malformed or was not minted here")
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
            raise invalid
        body, mac_text = token.split(".")
        try:
            payload, mac = _unb64(body), _unb64(mac_text)
        except (binascii.Error, ValueError):
            raise invalid from None
        if not hmac.compare_digest(mac, hmac.new(self.key, payload, hashlib.sha256).digest()):
            if self._minted_elsewhere(payload):
                raise SkillMcpError(Refusal.TOKEN_INVALID, OTHER_PROCESS, {"mintedBy": "another-process"})
            raise invalid
        data = json.loads(payload)
        if not isinstance(data, dict) or data.get("v") != 1:
            raise invalid
        return data

    def _minted_elsewhere(self, payload: bytes) -> bool:
        """The payload is one of ours (shape and version) naming another key. Unauthenticated:
        it is read only to word the refusal that follows either way."""
        try:
            data = json.loads(payload)
        except ValueError:
            return False
        if not isinstance(data, dict) or data.get("v") != 1:
            return False
        other = data.get("k")
        return isinstance(other, str) and len(other) == KEY_ID_CHARS and other != key_id(self.key)

    def check(self, token: object, canonical_plan: bytes) -> str:
        """Raise the right refusal or return the nonce to ``spend`` when the run starts."""
        data = self._open(token)
        nonce, exp, plan = data.get("n"), data.get("exp"), data.get("plan")
        if not isinstance(nonce, str) or not isinstance(exp, int) or not isinstance(plan, str):
            raise SkillMcpError(Refusal.TOKEN_INVALID, "the confirm token is malformed")
        if nonce in self._spent:
            raise SkillMcpError(Refusal.TOKEN_REUSED, "this confirm token was already used; preview again")
        if self.clock() >= exp:
            raise SkillMcpError(Refusal.TOKEN_EXPIRED, "the confirm token expired; preview again")
        if not hmac.compare_digest(plan, hashlib.sha256(canonical_plan).hexdigest()):
            raise SkillMcpError(
                Refusal.DRAFT_CHANGED,
                "the call differs from what was previewed (skill, script, arguments or the "
                "script's content changed); preview again",
            )
        return nonce

    def spend(self, nonce: str, token: str) -> None:
        """Mark ``nonce`` used. Call it before the process starts, so a run happens at most once."""
        data = self._open(token)
        exp = data.get("exp")
        now = self.clock()
        if len(self._spent) >= MAX_SPENT:
            for old in [n for n, e in self._spent.items() if e <= now]:
                del self._spent[old]
        if nonce in self._spent:
            raise SkillMcpError(Refusal.TOKEN_REUSED, "this confirm token was already used; preview again")
        self._spent[nonce] = float(exp) if isinstance(exp, int) else now
