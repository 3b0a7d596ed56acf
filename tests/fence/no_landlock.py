"""Run a command on what looks like a kernel without Landlock: ``python no_landlock.py CMD...``.

A seccomp filter of the test's own making (the project's binding, applied here in a wrapper
process the test starts) makes the three Landlock calls fail with ``ENOSYS``, as they do on a
kernel built without it; the filter is inherited by the command and everything it starts. Not
used by the product: a test's stand-in for an old kernel, never a switch in production code.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

from skill_mcp import seccomp


def main() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "no-new-privs")
    flt = seccomp.Filter(seccomp.ACT_ALLOW)
    for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
        flt.add(seccomp.act_errno(errno.ENOSYS), name)
    flt.load()
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
