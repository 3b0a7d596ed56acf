"""The SDK's import waits while an early answer is computed, between SDK module bodies only.

Packages written here stand for the SDK stack (``load_gate.SDK_PACKAGES`` and ``LOAD_ORDER``
patched to name them): a package whose ``__init__`` stops at a signal, then imports a child.
While the main thread is ``busy()``, the loading thread must not run the child's body; once
idle, it must. The control: the same package outside the SDK stack is not paused.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from skill_mcp.surfaces.stdio import load_gate

SETTLE_S = 0.3


def _package(root: Path, name: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(
        "import gate_signal\ngate_signal.reached.set()\ngate_signal.go.wait(30)\nfrom . import child\n",
        encoding="utf-8",
    )
    (root / name / "child.py").write_text("import gate_signal\ngate_signal.ran.append(__name__)\n", encoding="utf-8")


@pytest.fixture
def signal_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> object:
    module = type(sys)("gate_signal")
    module.reached = threading.Event()  # type: ignore[attr-defined]
    module.go = threading.Event()  # type: ignore[attr-defined]
    module.ran = []  # type: ignore[attr-defined]  # the child bodies that ran (in sys.modules is not enough: a module is put there before its body runs)
    monkeypatch.setitem(sys.modules, "gate_signal", module)
    monkeypatch.syspath_prepend(str(tmp_path))
    return module


@contextmanager
def _loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal: object, name: str, sdk: bool
) -> Iterator[tuple[load_gate.Gate, threading.Thread]]:
    """A loading thread importing package ``name`` (in the SDK stack when ``sdk``), stopped
    inside its ``__init__`` (``signal.go`` lets it on); its modules gone afterwards."""
    _package(tmp_path, name)
    monkeypatch.setattr(load_gate, "LOAD_ORDER", (name,))
    if sdk:
        monkeypatch.setattr(load_gate, "SDK_PACKAGES", load_gate.SDK_PACKAGES | {name})
    gate = load_gate.Gate()
    loader = threading.Thread(target=gate.load_sdk, daemon=True)
    loader.start()
    try:
        assert signal.reached.wait(30)  # type: ignore[attr-defined]  # inside the package's body, idle so far
        yield gate, loader
        loader.join(30)
        assert not loader.is_alive() and f"{name}.child" in signal.ran  # type: ignore[attr-defined]
    finally:
        signal.go.set()  # type: ignore[attr-defined]
        for mod in (name, f"{name}.child"):
            sys.modules.pop(mod, None)


def _load_while_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal: object, name: str, sdk: bool) -> bool:
    """Whether ``name.child`` ran while the main thread was busy (then: that it ran once idle)."""
    with _loading(tmp_path, monkeypatch, signal, name, sdk) as (gate, _loader):
        with gate.busy():
            signal.go.set()  # type: ignore[attr-defined]
            time.sleep(SETTLE_S)
            ran_while_busy = f"{name}.child" in signal.ran  # type: ignore[attr-defined]
    return ran_while_busy


def test_an_sdk_module_body_waits_while_an_early_answer_is_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_module: object
) -> None:
    assert not _load_while_busy(tmp_path, monkeypatch, signal_module, "gate_sdk_like", sdk=True)


def test_a_module_outside_the_sdk_stack_never_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_module: object
) -> None:
    # The control: the same import, not named in SDK_PACKAGES, runs on while the main thread is busy.
    assert _load_while_busy(tmp_path, monkeypatch, signal_module, "gate_not_sdk", sdk=False)


def test_with_nothing_asked_the_import_never_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gate_quick").mkdir()
    (tmp_path / "gate_quick" / "__init__.py").write_text("from . import child\n", encoding="utf-8")
    (tmp_path / "gate_quick" / "child.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(load_gate, "LOAD_ORDER", ("gate_quick",))
    monkeypatch.setattr(load_gate, "SDK_PACKAGES", load_gate.SDK_PACKAGES | {"gate_quick"})
    gate = load_gate.Gate()
    try:
        gate.load_sdk()
        assert gate.waits == 0 and "gate_quick.child" in sys.modules
        assert gate not in sys.meta_path  # the finder is gone once the SDK is loaded
        assert gate.deferred == 0.0  # nothing answered, so no quiet gap was waited for
    finally:
        for mod in ("gate_quick", "gate_quick.child"):
            sys.modules.pop(mod, None)


def _child_after_answer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signal: object,
    quiet_s: float,
    limit_s: float,
    *,
    hurry: bool = False,
) -> tuple[bool, float, load_gate.Gate]:
    """An SDK-stack package's child imported after one early answer ends: whether it had run
    ``SETTLE_S`` after the answer, how long after the answer it had run (``Gate.hurry`` called
    at ``SETTLE_S`` when ``hurry``), and the gate."""
    monkeypatch.setattr(load_gate, "QUIET_S", quiet_s)
    monkeypatch.setattr(load_gate, "DEFER_LIMIT_S", limit_s)
    with _loading(tmp_path, monkeypatch, signal, "gate_quiet", sdk=True) as (gate, _loader):
        with gate.busy():
            signal.go.set()  # type: ignore[attr-defined]
        answered = time.monotonic()
        time.sleep(SETTLE_S)
        ran_soon = "gate_quiet.child" in signal.ran  # type: ignore[attr-defined]
        if hurry:
            gate.hurry()
    return ran_soon, time.monotonic() - answered, gate


def test_after_an_answer_the_sdk_import_waits_for_a_quiet_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_module: object
) -> None:
    # A client walking pages asks again within milliseconds: the loading thread leaves it the
    # GIL for QUIET_S after each answer (here 3 s: SETTLE_S after the answer, nothing has run).
    ran_soon, _after, gate = _child_after_answer(tmp_path, monkeypatch, signal_module, quiet_s=3.0, limit_s=10.0)
    assert not ran_soon
    assert 2.5 <= gate.deferred < 3.5


def test_the_quiet_waits_are_bounded_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_module: object
) -> None:
    # A client that never pauses cannot keep the SDK unloaded: past DEFER_LIMIT_S of quiet waits
    # the import runs on, whatever the gap (QUIET_S 60 s here, the limit 0.1 s).
    ran_soon, after, gate = _child_after_answer(tmp_path, monkeypatch, signal_module, quiet_s=60.0, limit_s=0.1)
    assert ran_soon and after < 30
    assert 0.1 <= gate.deferred < 0.6


def test_once_the_early_phase_ends_the_quiet_wait_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_module: object
) -> None:
    # A request only the SDK server answers stops the early phase (server.serve_stdio_early calls
    # hurry): the loading thread sleeping in a quiet gap (60 s here, the limit 120 s) runs on at
    # once; SETTLE_S after the answer it was still waiting (the control).
    ran_soon, after, gate = _child_after_answer(
        tmp_path, monkeypatch, signal_module, quiet_s=60.0, limit_s=120.0, hurry=True
    )
    assert not ran_soon
    assert after < 30 and gate.deferred < 30
