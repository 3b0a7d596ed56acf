"""The connection gate's decisions, without sockets: who is evicted, who is never, what is counted."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill_mcp.surfaces.http.conn import ConnectionGate, ConnectionLimits, ShedTally, peer_key

SMALL = ConnectionLimits(max_in_flight=2, max_per_peer=3, max_connections=5)


@dataclass(eq=False)
class Conn:
    peer: str
    name: str = field(default="")
    evicted: bool = False

    def evict(self) -> None:
        self.evicted = True


def _admit(gate: ConnectionGate, conn: Conn) -> list[Conn]:
    admitted, evicted = gate.admit(conn)
    assert admitted
    return [victim for victim, _ in evicted]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("client", "key"),
    [
        (("127.0.0.1", 5), "127.0.0.1"),
        (("::ffff:10.1.2.3", 5), "10.1.2.3"),
        (("2001:db8::1", 5), "2001:db8::/64"),
        (("2001:db8::ffff:1", 5), "2001:db8::/64"),
        (("2001:db8:0:1::1", 5), "2001:db8:0:1::/64"),
        (None, ""),
        (("not-an-ip", 0), "not-an-ip"),
    ],
)
def test_peer_key_counts_an_ipv6_client_by_its_64(client: tuple[str, int] | None, key: str) -> None:
    assert peer_key(client) == key


def test_the_per_peer_cap_evicts_that_peers_oldest_waiting_connection() -> None:
    gate = ConnectionGate(SMALL)
    a1, a2, a3, b1 = Conn("a"), Conn("a"), Conn("a"), Conn("b")
    for conn in (a1, a2, a3, b1):
        assert _admit(gate, conn) == []
    a4 = Conn("a")
    assert _admit(gate, a4) == [a1]  # a's oldest, not b's
    assert gate.open_from("a") == 3 and gate.open_from("b") == 1


def test_a_connection_in_flight_is_never_evicted() -> None:
    gate = ConnectionGate(SMALL)
    a1, a2, a3 = Conn("a"), Conn("a"), Conn("a")
    for conn in (a1, a2, a3):
        _admit(gate, conn)
    gate.started(a1)
    gate.started(a2)
    assert _admit(gate, Conn("a")) == [a3]
    assert gate.in_flight == 2


def test_a_finished_request_makes_its_connection_the_newest_waiting_one() -> None:
    gate = ConnectionGate(SMALL)
    a1, a2, a3 = Conn("a"), Conn("a"), Conn("a")
    for conn in (a1, a2, a3):
        _admit(gate, conn)
    gate.started(a1)
    gate.finished(a1)  # a1 was just used: a2 has waited longest
    assert _admit(gate, Conn("a")) == [a2]
    assert gate.in_flight == 0


def test_the_global_cap_evicts_from_the_peer_holding_the_most() -> None:
    gate = ConnectionGate(SMALL)
    b1 = Conn("b")
    _admit(gate, b1)  # the oldest of all, but b holds one connection
    heavy = [Conn("a") for _ in range(3)]
    for conn in heavy:
        _admit(gate, conn)
    _admit(gate, Conn("c"))
    assert gate.total == 5
    assert _admit(gate, Conn("d")) == [heavy[0]]


def test_a_newcomer_is_refused_only_when_nothing_it_competes_with_is_waiting() -> None:
    gate = ConnectionGate(ConnectionLimits(max_in_flight=1, max_per_peer=2, max_connections=2))
    a1, a2 = Conn("a"), Conn("a")
    _admit(gate, a1)
    _admit(gate, a2)
    gate.started(a1)
    gate.started(a2)  # over max_in_flight: the transport answers it 503, but it is in flight
    admitted, evicted = gate.admit(Conn("a"))
    assert not admitted and evicted == []
    gate.finished(a2)
    assert _admit(gate, Conn("a")) == [a2]


def test_forget_is_idempotent_and_frees_the_slot() -> None:
    gate = ConnectionGate(SMALL)
    a1 = Conn("a")
    _admit(gate, a1)
    gate.forget(a1)
    gate.forget(a1)
    gate.finished(a1)  # a late hook for a forgotten connection changes nothing
    assert gate.total == 0 and gate.open_from("a") == 0 and gate.in_flight == 0


def test_limits_keep_the_in_flight_limit_below_the_caps() -> None:
    with pytest.raises(ValueError):
        ConnectionLimits(max_in_flight=256, max_per_peer=256, max_connections=512)
    with pytest.raises(ValueError):
        ConnectionLimits(max_per_peer=600, max_connections=512)


def test_shed_tally_is_due_at_once_then_once_per_period() -> None:
    tally = ShedTally(every_s=10.0)
    assert tally.add("peer-cap", "a", now_s=100.0) == 0.0
    assert tally.add("peer-cap", "a", now_s=100.0) is None  # already scheduled
    summary = tally.take(now_s=100.0)
    assert summary == {"causes": {"peer-cap": 2}, "total": 2, "topPeers": [{"peer": "a", "count": 2}]}
    assert tally.add("head-timeout", "b", now_s=103.0) == pytest.approx(7.0)
    assert tally.add("peer-cap", "a", now_s=104.0) is None
    assert tally.take(now_s=110.0)["causes"] == {"head-timeout": 1, "peer-cap": 1}
    assert tally.add("busy", "a", now_s=200.0) == 0.0  # quiet for a period: at once again


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["open", "start", "finish", "close"]), st.sampled_from(["a", "b", "c"]), st.integers(0, 30)
    ),
    max_size=200,
)


@given(EVENTS)
def test_property_caps_hold_and_in_flight_connections_survive(events: list[tuple[str, str, int]]) -> None:
    limits = ConnectionLimits(max_in_flight=2, max_per_peer=4, max_connections=6)
    gate = ConnectionGate(limits)
    live: list[Conn] = []
    flying: set[int] = set()
    for action, peer, index in events:
        if action == "open":
            conn = Conn(peer)
            admitted, evicted = gate.admit(conn)
            for victim, _ in evicted:
                assert id(victim) not in flying, "a connection in flight was evicted"
                live.remove(victim)  # type: ignore[arg-type]
            if admitted:
                live.append(conn)
            else:
                assert all(id(c) in flying for c in live if c.peer == peer) or all(id(c) in flying for c in live)
        elif live:
            conn = live[index % len(live)]
            if action == "start":
                gate.started(conn)
                flying.add(id(conn))
            elif action == "finish":
                gate.finished(conn)
                flying.discard(id(conn))
            else:
                gate.forget(conn)
                live.remove(conn)
                flying.discard(id(conn))
        assert gate.total == len(live) <= limits.max_connections
        assert all(gate.open_from(p) <= limits.max_per_peer for p in "abc")
        assert gate.in_flight == len(flying)
