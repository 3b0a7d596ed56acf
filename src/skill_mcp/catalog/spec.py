"""Agent Skills format checks that carry no security meaning.

A violation here is served *by the tools* with a ``spec-warning`` problem, not refused: real
skill repositories hold skills with a 1,068-character description or an extra top-level key,
and users expect them served. The checks that *do* refuse (a missing description, a directory
name that cannot be a skill name) live in ``catalog.skill``, which calls ``is_valid_name`` here
for the directory name and ``spec_warnings`` for the rest.

The Skills extension is stricter: its hosts validate every entry, and one invalid entry can
fail a whole listing, so ``extension_rules`` names each rule that keeps a served skill out of
the extension (``extension-excluded``; docs/reasons.md lists them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from skill_mcp.reasons import ExtensionRule

NAME_RULE = re.compile(r"^(?!-)(?!.*--)[a-z0-9-]{1,64}(?<!-)$")
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
KNOWN_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools", "mcp-host"})


def is_valid_name(name: str) -> bool:
    return bool(NAME_RULE.match(name))


def spec_warnings(frontmatter: Mapping[str, Any]) -> list[str]:
    """Every Agent Skills rule the frontmatter breaks, as sentences. Empty when clean."""
    out: list[str] = []
    name = frontmatter.get("name")
    if name is None:
        out.append("the frontmatter has no name")
    elif not isinstance(name, str) or not is_valid_name(name):
        out.append(f"name {name!r} is not 1-64 lowercase letters, digits and single hyphens")
    description = frontmatter.get("description")
    if isinstance(description, str) and len(description) > DESCRIPTION_MAX:
        out.append(f"description is {len(description)} characters; the format allows {DESCRIPTION_MAX}")
    compatibility = frontmatter.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > COMPATIBILITY_MAX):
        out.append(f"compatibility must be a string of at most {COMPATIBILITY_MAX} characters")
    license_value = frontmatter.get("license")
    if license_value is not None and not isinstance(license_value, str):
        out.append("license must be a string")
    metadata = frontmatter.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            out.append("metadata must be a map of strings to strings")
        else:
            bad = sorted(str(k) for k, v in metadata.items() if not isinstance(v, str))
            if bad:
                out.append(f"metadata values must be strings (not: {', '.join(bad)})")
    allowed = frontmatter.get("allowed-tools")
    if allowed is not None and not isinstance(allowed, str):
        out.append("allowed-tools must be a space-separated string")
    unknown = sorted(str(k) for k in frontmatter if k not in KNOWN_KEYS)
    if unknown:
        out.append(f"unknown top-level keys: {', '.join(unknown)}")
    return out


def extension_rules(frontmatter: Mapping[str, Any], dir_name: str) -> list[tuple[ExtensionRule, str]]:
    """Every rule that keeps a skill served under ``dir_name`` out of the Skills extension.

    What a conforming host checks from the entry alone: the naming rules, the URI rule (the
    final segment of ``skill://<path>/SKILL.md`` is the directory name and must equal the
    frontmatter ``name``), and the Agent Skills field rules. Unknown top-level keys are not a
    rule here: the entry carries every field the author wrote, and hosts pass them through.
    """
    out: list[tuple[ExtensionRule, str]] = []
    name = frontmatter.get("name")
    if name is None:
        out.append((ExtensionRule.NAME_MISSING, "the frontmatter has no name, and an entry's URI must end in it"))
    elif not isinstance(name, str) or not is_valid_name(name):
        out.append(
            (
                ExtensionRule.NAME_INVALID,
                f"the frontmatter name {name!r} is not 1-64 lowercase letters, digits and single hyphens",
            )
        )
    elif name != dir_name:
        out.append(
            (
                ExtensionRule.NAME_MISMATCH,
                f"its URI ends in the directory name {dir_name!r}, and the "
                f"frontmatter name is {name!r}; rename one to match the other",
            )
        )
    description = frontmatter.get("description")
    if isinstance(description, str) and len(description) > DESCRIPTION_MAX:
        out.append(
            (
                ExtensionRule.DESCRIPTION_TOO_LONG,
                f"the description is {len(description)} characters; the Agent Skills format allows {DESCRIPTION_MAX}",
            )
        )
    compatibility = frontmatter.get("compatibility")
    if "compatibility" in frontmatter and not (
        isinstance(compatibility, str) and 1 <= len(compatibility) <= COMPATIBILITY_MAX
    ):
        out.append(
            (ExtensionRule.COMPATIBILITY_INVALID, f"compatibility must be a string of 1-{COMPATIBILITY_MAX} characters")
        )
    if "license" in frontmatter and not isinstance(frontmatter.get("license"), str):
        out.append((ExtensionRule.LICENSE_INVALID, "license must be a string"))
    metadata = frontmatter.get("metadata")
    if "metadata" in frontmatter and not (
        isinstance(metadata, Mapping) and all(isinstance(v, str) for v in metadata.values())
    ):
        out.append(
            (
                ExtensionRule.METADATA_INVALID,
                "metadata must be a map of strings to strings (quote numbers, dates and yes/no values)",
            )
        )
    if "allowed-tools" in frontmatter and not isinstance(frontmatter.get("allowed-tools"), str):
        out.append((ExtensionRule.ALLOWED_TOOLS_INVALID, "allowed-tools must be one space-separated string"))
    return out
