"""The launcher's capability drop is verified against the kernel's view. No Docker; root.

Each case runs in a fresh ``python -c`` child so the test runner keeps its own capabilities.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from skill_mcp_launcher.caps import SECUREBITS

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"), reason="needs root to hold capabilities it can drop"
)

PRELUDE = "from skill_mcp_launcher import caps\nKEEP = (caps.CAP_SETUID, caps.CAP_SETGID, caps.CAP_KILL)\n"


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", PRELUDE + code], capture_output=True, text=True, timeout=60, check=False
    )


def test_capability_drop_leaves_exactly_what_is_kept() -> None:
    proc = _child("s = caps.set_caps(KEEP)\nprint(hex(s.effective), hex(s.permitted), s.inheritable, s.ambient)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0xe0", "0xe0", "0", "0"]


def test_a_drop_the_kernel_did_not_apply_fails() -> None:
    # Fault injection: the kernel's view, as read back, still shows every capability. That is
    # exactly the "silent no-op" the launcher must turn into a failed boot.
    fake = (
        "real = caps.read_state\n"
        "caps.read_state = lambda pid='self': real(pid).__class__(effective=(1 << 41) - 1, "
        "permitted=(1 << 41) - 1, inheritable=0, bounding=0, ambient=0, no_new_privs=True)\n"
    )
    proc = _child(fake + "try:\n    caps.set_caps(KEEP)\nexcept caps.CapError as e:\n    print('CapError', e)\n")
    assert proc.stdout.startswith("CapError"), proc.stdout + proc.stderr
    # Positive control: without the fault the same call succeeds (previous test, same child code).


def test_a_capability_not_held_cannot_be_kept() -> None:
    proc = _child(
        "caps.set_caps(KEEP)\ntry:\n    caps.set_caps((*KEEP, caps.CAP_NET_ADMIN))\n"
        "except caps.CapError as e:\n    print('CapError', e)\n"
    )
    assert proc.stdout.startswith("CapError"), proc.stdout + proc.stderr


def test_bounding_set_is_emptied_while_kept_capabilities_stay_usable() -> None:
    code = (
        "import os\nbefore = caps.read_state().bounding\ncaps.drop_bounding()\ns = caps.set_caps(KEEP)\n"
        "pid = os.fork()\nif pid == 0:\n    os.setresuid(65534, 65534, 65534)\n    os._exit(0)\n"
        "print(hex(before), hex(s.bounding), hex(s.effective), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"
    )
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr
    before, bounding, effective, setuid_rc = proc.stdout.split()
    assert int(before, 16) >> 12 & 1  # positive control: NET_ADMIN was in the bounding set
    assert bounding == "0x0"
    assert effective == "0xe0" and setuid_rc == "0"  # SETUID still works with an empty bounding set


def test_bounding_set_cannot_be_emptied_without_setpcap() -> None:
    proc = _child(
        "caps.set_caps(KEEP)\ntry:\n    caps.drop_bounding()\nexcept caps.CapError as e:\n    print('CapError', e)\n"
    )
    assert proc.stdout.startswith("CapError"), proc.stdout + proc.stderr
    # Positive control: with SETPCAP held the same call empties it (previous test).


def test_a_bounding_drop_the_kernel_did_not_apply_fails() -> None:
    fake = (
        "real = caps.read_state\n"
        "caps.read_state = lambda pid='self': real(pid).__class__(effective=0, permitted=0, inheritable=0, "
        "bounding=1 << 12, ambient=0, no_new_privs=True)\n"
    )
    proc = _child(fake + "try:\n    caps.drop_bounding()\nexcept caps.CapError as e:\n    print('CapError', e)\n")
    assert proc.stdout.startswith("CapError") and "CapBnd=0x1000" in proc.stdout, proc.stdout + proc.stderr


def test_boot_drop_fails_when_the_bounding_set_comes_back() -> None:
    # boot.drop_capabilities verifies the result once more after capset; fault-inject a set
    # that reports NET_ADMIN in the bounding set although SETPCAP was held.
    code = (
        "from skill_mcp_launcher import boot\nreal = caps.set_caps\n"
        "caps.set_caps = lambda keep: real(keep).__class__(effective=0xe0, permitted=0xe0, inheritable=0, "
        "bounding=1 << 12, ambient=0, no_new_privs=False)\n"
        "try:\n    boot.drop_capabilities(caps.read_state())\nexcept caps.CapError as e:\n    print('CapError', e)\n"
        "else:\n    print('booted')\n"
    )
    assert _child(code).stdout.startswith("CapError")
    # Positive control: the real path boots with an empty bounding set.
    real = _child(
        "from skill_mcp_launcher import boot\ns = boot.drop_capabilities(caps.read_state())\n"
        "print(hex(s.bounding), hex(s.effective), caps.read_state().no_new_privs)"
    )
    assert real.stdout.split() == ["0x0", "0xe0", "True"], real.stdout + real.stderr


def test_after_the_securebits_lock_an_exec_as_root_gains_no_capability() -> None:
    grep = (
        "import subprocess\nout = subprocess.run(['/bin/grep', 'CapEff', '/proc/self/status'], capture_output=True, "
        "text=True, check=True).stdout.split()[1]\n"
    )
    locked = _child("bits = caps.lock_securebits()\n" + grep + "print(hex(bits), out)")
    assert locked.returncode == 0, locked.stderr
    bits, cap_eff = locked.stdout.split()
    assert int(bits, 16) == SECUREBITS and int(cap_eff, 16) == 0
    # Positive control: without the lock the same exec as root holds capabilities.
    unlocked = _child(grep + "print(out)")
    assert int(unlocked.stdout.strip(), 16) != 0, unlocked.stdout + unlocked.stderr


def test_securebits_cannot_be_locked_without_setpcap() -> None:
    proc = _child(
        "caps.set_caps(KEEP)\ntry:\n    caps.lock_securebits()\nexcept caps.CapError as e:\n    print('CapError', e)\n"
    )
    assert proc.stdout.startswith("CapError"), proc.stdout + proc.stderr
    # Positive control: with SETPCAP held the lock succeeds (previous test).
