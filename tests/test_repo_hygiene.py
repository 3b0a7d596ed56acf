"""The repository speaks of itself only: no path of one machine, no pointer a reader cannot follow.

A newcomer reads the tree without the notes, issue tracker or machines it was written on, so a
comment or a default that names them is a sentence the reader cannot finish. ``git ls-files``
gives what a fresh clone holds; each pattern below names what it catches, and the negative
control proves the check would see one.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Written with a character class so that this file does not match itself.
FORBIDDEN = {
    "an absolute path of a development machine": re.compile(r"/[w]ork/|/[t]mp/ceo|/[r]oot/\.pyenv"),
    "a document outside the repository": re.compile(
        r"\bthe [s]eeds?\b|design [c]ard|user's [s]pecification|[D]ESIGN\.md"
    ),
    "notes or a decision a reader cannot open": re.compile(
        r"\bdesign [n]otes\b|\bthe [n]otes'|\bthe [n]otes (?:say|call|write|describe|use)\b|\bper the (?:[n]otes|[d]esign)\b"
        r"|\bsee the [d]esign\b|\bas [d]ecided\b"
    ),
    "an issue or a finding by number": re.compile(r"\b[i]ssues? \d+\b|\b[F]inding F\d\b|\bby [H]\d\b|\b[H]\d's\b"),
}


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    files = []
    for name in out.decode("utf-8", "surrogateescape").split("\0"):
        path = REPO / name
        if name and path.is_file() and not path.is_symlink() and path.stat().st_size < 2_000_000:
            files.append(path)
    return files


def _hits(text: str) -> list[str]:
    return [why for why, pattern in FORBIDDEN.items() if pattern.search(text)]


def test_no_file_names_a_machine_path_or_a_document_a_reader_cannot_open() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    bad = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for why in _hits(line):
                bad.append(f"{path.relative_to(REPO)}:{number}: {why}: {line.strip()[:120]}")
    assert not bad, "\n".join(bad)


# Each pointer is spelled in two explicit pieces, so that this file does not match itself
# (an implicit concatenation would be joined into one literal by the formatter).
@pytest.mark.parametrize(
    "line",
    [
        "DEFAULT = Path('/" + "work/corpora')",
        "as the " + "seed promises",
        "(iss" + "ue 8)",
        "Finding " + "F4: the broker",
        "the skillmcp design " + "notes' tools",
        "the no" + "tes' handshake line",
        "as the no" + "tes call it",
        "see the des" + "ign for why",
        "as deci" + "ded, the proxy",
        "per the no" + "tes",
    ],
)
def test_the_check_sees_each_kind_of_pointer(line: str) -> None:  # negative control
    assert _hits(line)


def test_the_check_leaves_ordinary_text_alone() -> None:  # positive control
    assert not _hits("the random seed of the benchmark corpus; issues a request; /usr/local/bin")
    assert not _hits(
        "the notes for settings.roots; read the notes; the design of the settings page; "
        "whoever wrote the command line has decided"
    )
