"""How many connections the HTTP transport holds, and for how long one may wait for its request.

uvicorn alone keeps any connection that never finishes its request head for ever (it has no
header-read deadline), and its ``limit_concurrency`` counts open *connections*, idle ones
included, so 256 sockets that send nothing made it answer 503 to every legitimate client. This
module is what replaces both, in three parts:

* ``ConnectionLimits`` - every bound, in one place (the table in docs/http.md);
* ``ConnectionGate`` - the bookkeeping, pure and single-threaded (it runs on the event loop):
  each connection is either *waiting* (idle between requests, or still sending its head) or
  *in flight* (its head is complete and its response is not). When a cap is reached it evicts
  the oldest waiting connection instead of refusing the newcomer: per peer first, then, at the
  global cap, the peer holding the most connections. A connection in flight is never evicted,
  and only requests in flight count against the concurrency limit, never idle sockets. So a
  flood of sockets from one address costs that flood its oldest sockets, and a legitimate
  client from the very same address (a reverse proxy makes every client one address) still
  gets a connection and an answer;
* ``ShedTally`` - what was evicted or cut, summed into one log line at most every
  ``LOG_EVERY_S`` seconds, so a flood cannot flood the log.

The uvicorn side (``surfaces.http.protocol``) calls the gate at each state change.

A flood from one address can still evict a legitimate client's connection in the moment
between its connect and the end of its head (a few milliseconds on a healthy network): it
would have to open more than the per-peer cap of new connections within that moment, and the
client then reconnects.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["DEFAULT_LIMITS", "LOG_EVERY_S", "ConnectionGate", "ConnectionLimits", "ShedTally", "Tracked", "peer_key"]

# At most one summary line of evictions and cut connections per this many seconds.
LOG_EVERY_S = 10.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Every bound of the HTTP transport's connection handling (docs/http.md, "Limits").

    ``max_in_flight`` stays below both caps, so a cap always finds a waiting connection to
    evict, and a newcomer is refused only if every connection it competes with is in flight.
    """

    # A connection must deliver a complete request head this long after it started waiting
    # for one (when it opened, or when its previous answer ended), else it is closed.
    head_timeout_s: float = 10.0
    # The request line and headers together; past this the request gets 400 and the
    # connection is closed. A bearer token and a reverse proxy's headers fit many times over.
    max_head_bytes: int = 32 * 1024
    # An idle keep-alive connection that sends nothing for this long after an answer is closed.
    keep_alive_s: int = 5
    # A connection whose client takes nothing of what the server writes for this long (its write
    # buffer stays over the transport's high-water mark) is dropped, buffer and all: an answer
    # nobody reads would hold its memory, its reserved bytes and its in-flight slot for ever.
    write_stall_s: float = 30.0
    # Open connections from one address (an IPv6 client: its /64), then in all. A file
    # descriptor each: 512 leaves room under the common soft RLIMIT_NOFILE of 1,024.
    max_per_peer: int = 256
    max_connections: int = 512
    # Requests whose head is complete and whose answer is not (a notification stream counts
    # while it is open); past this a request gets 503 ``http-busy``.
    max_in_flight: int = 128

    def __post_init__(self) -> None:
        if not 0 < self.max_in_flight < self.max_per_peer <= self.max_connections:
            raise ValueError("expected 0 < max_in_flight < max_per_peer <= max_connections")


DEFAULT_LIMITS = ConnectionLimits()


def peer_key(client: tuple[str, int] | None) -> str:
    """The address a per-peer cap counts: the IPv4 address (an IPv4-mapped IPv6 one too), or
    the /64 of an IPv6 address (one host usually holds a whole /64). ``""`` when unknown."""
    if not client:
        return ""
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return client[0]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Tracked(Protocol):
    """A connection as the gate sees it (``surfaces.http.protocol.GatedH11Protocol``)."""

    peer: str

    def evict(self) -> None:
        """Close the connection now; the gate has already forgotten it."""


@dataclass(slots=True)
class ShedTally:
    """Evictions and cut connections since the last log line, by cause and by peer.

    ``add`` says when the next line is due (seconds from now), or ``None`` when one is already
    scheduled; ``take`` returns the summary and starts the next period. The first event after a
    quiet period is due at once, so an operator sees an attack start without delay.
    """

    every_s: float = LOG_EVERY_S
    causes: Counter[str] = field(default_factory=Counter)
    peers: Counter[str] = field(default_factory=Counter)
    last_s: float = float("-inf")
    scheduled: bool = False

    def add(self, cause: str, peer: str, now_s: float) -> float | None:
        self.causes[cause] += 1
        self.peers[peer] += 1
        if self.scheduled:
            return None
        self.scheduled = True
        return max(0.0, self.last_s + self.every_s - now_s)

    def take(self, now_s: float) -> dict[str, Any]:
        summary = {
            "causes": dict(self.causes),
            "total": sum(self.causes.values()),
            "topPeers": [{"peer": p, "count": n} for p, n in self.peers.most_common(3)],
        }
        self.causes.clear()
        self.peers.clear()
        self.last_s = now_s
        self.scheduled = False
        return summary


class ConnectionGate:
    """Which connections are open, per peer, and which of them are waiting (oldest first)."""

    def __init__(self, limits: ConnectionLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        # Per peer, the waiting connections in the order they started waiting (dicts keep
        # insertion order, so the first key is the one to evict).
        self._waiting: dict[str, dict[Tracked, None]] = {}
        self._open: Counter[str] = Counter()
        self._flying: set[Tracked] = set()
        self._known: set[Tracked] = set()

    @property
    def total(self) -> int:
        return len(self._known)

    @property
    def in_flight(self) -> int:
        return len(self._flying)

    def open_from(self, peer: str) -> int:
        return self._open[peer]

    def admit(self, conn: Tracked) -> tuple[bool, list[tuple[Tracked, str]]]:
        """Count a new connection, evicting to make room: (admitted, [(evicted, cause)]).

        Refused only when the peer (or every peer) has no waiting connection left to evict.
        """
        evicted: list[tuple[Tracked, str]] = []
        if self._open[conn.peer] >= self.limits.max_per_peer:
            victim = self._oldest_waiting(conn.peer)
            if victim is None:
                return False, evicted
            evicted.append((victim, "peer-cap"))
        elif self.total >= self.limits.max_connections:
            victim = self._oldest_waiting_of_heaviest()
            if victim is None:
                return False, evicted
            evicted.append((victim, "global-cap"))
        for victim, _ in evicted:
            self.forget(victim)
        self._known.add(conn)
        self._open[conn.peer] += 1
        self._waiting.setdefault(conn.peer, {})[conn] = None
        return True, evicted

    def started(self, conn: Tracked) -> None:
        """Its request head is complete: in flight, no longer evictable."""
        if conn in self._known:
            self._waiting.get(conn.peer, {}).pop(conn, None)
            self._flying.add(conn)

    def finished(self, conn: Tracked) -> None:
        """Its answer is complete: waiting again, as the newest of its peer."""
        if conn in self._known:
            self._flying.discard(conn)
            waiting = self._waiting.setdefault(conn.peer, {})
            waiting.pop(conn, None)
            waiting[conn] = None

    def forget(self, conn: Tracked) -> None:
        """Closed (or evicted); calling it twice is harmless."""
        if conn not in self._known:
            return
        self._known.discard(conn)
        self._flying.discard(conn)
        waiting = self._waiting.get(conn.peer)
        if waiting is not None:
            waiting.pop(conn, None)
            if not waiting:
                del self._waiting[conn.peer]
        self._open[conn.peer] -= 1
        if self._open[conn.peer] <= 0:
            del self._open[conn.peer]

    def _oldest_waiting(self, peer: str) -> Tracked | None:
        waiting = self._waiting.get(peer)
        return next(iter(waiting)) if waiting else None

    def _oldest_waiting_of_heaviest(self) -> Tracked | None:
        # O(peers), run only at the global cap; peers are at most max_connections.
        peers = [p for p, w in self._waiting.items() if w]
        if not peers:
            return None
        return self._oldest_waiting(max(peers, key=lambda p: self._open[p]))
