"""``server.build_server`` never picks the script states itself: with ``tools`` they are given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skill_mcp.config import load_settings
from skill_mcp.server import build_server
from skill_mcp.surfaces.app import SkillServer
from skill_mcp.surfaces.declared_scripts import DeclaredScripts


def test_tools_without_script_states_are_refused_and_with_them_served(tmp_path: Path) -> None:
    settings = load_settings([str(tmp_path)], {})
    half: Any = build_server  # the overloads refuse these calls to mypy; this is the runtime's word
    with pytest.raises(TypeError, match="together"):
        half(settings, tools=())
    with pytest.raises(TypeError, match="together"):
        half(settings, script_states=DeclaredScripts(settings))
    # Positive control: the same call with both is a server.
    assert isinstance(build_server(settings, tools=(), script_states=DeclaredScripts(settings)), SkillServer)
