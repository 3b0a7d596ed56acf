"""Where a host parsing frontmatter as YAML 1.1 would read another value than we publish.

The published frontmatter is the YAML 1.2 core-schema reading (``catalog.yaml12``), which is
what the format's YAML means. Many hosts parse with PyYAML's default loader (``yaml.safe_load``),
which resolves plain scalars by YAML 1.1: ``yes``/``on``/``no``/``off`` are booleans, ``2024-01-01``
is a date, ``1:30`` is the sexagesimal 90, ``017`` is octal 15, ``1_000`` is 1000, while
``0o17`` and ``1e3`` stay strings. Such a host compares its reading with the entry field by field
(the stable extension text requires it) and refuses the skill on any difference; FastMCP's
``read_skill()`` does exactly that. ``differences`` names every such field, so ``validate`` can
tell the author which value to quote, and the catalog can keep the skill out of the extension.

The comparison is strict about types (``True`` is not ``1``), pairs mapping entries by position
(both loaders keep the source order, and a key can itself read differently: ``on:``), and costs
one libyaml parse per skill when PyYAML has its C extension.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Difference:
    """One frontmatter field that YAML 1.1 reads otherwise. ``field`` is a dotted path."""

    field: str
    yaml12: Any
    yaml11: Any
    key: bool = False  # the mapping key itself reads otherwise (``on:``)

    def advice(self) -> str:
        """How to write the value so that both readings agree."""
        if self.key:
            return f"quote the key ({json.dumps(self.yaml12)}:) so every host reads the text"
        if isinstance(self.yaml12, str):
            quoted = json.dumps(self.yaml12, ensure_ascii=False)
            return f"quote it ({self.field.rsplit('.', 1)[-1]}: {quoted}) so every host reads the text"
        if isinstance(self.yaml12, bool | int | float) or self.yaml12 is None:
            return f"write it as {json.dumps(self.yaml12)}, or quote it if you mean the text"
        return "quote the values inside it, or write them in a form both YAML versions read alike"


def _load11(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader: PyYAML's safe_load, through libyaml


def _walk(path: str, a: Any, b: Any, out: list[Difference]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if len(a) != len(b):
            out.append(Difference(path or "(frontmatter)", a, b))
            return
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            here = f"{path}.{ka}" if path else str(ka)
            if type(ka) is not type(kb) or ka != kb:
                out.append(Difference(here, ka, kb, key=True))
            else:
                _walk(here, va, vb, out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (ia, ib) in enumerate(zip(a, b, strict=True)):
            _walk(f"{path}[{index}]", ia, ib, out)
        return
    if type(a) is not type(b) or a != b:
        out.append(Difference(path or "(frontmatter)", a, b))


def differences(text: str, published: Mapping[str, Any]) -> list[Difference]:
    """Every field of ``published`` (the YAML 1.2 reading of ``text``) that YAML 1.1 reads otherwise."""
    import yaml

    try:
        other = _load11(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        return [Difference("(frontmatter)", "parsed", f"not parsed: {str(exc).splitlines()[0]}")]
    if other is None:
        other = {}
    out: list[Difference] = []
    _walk("", dict(published), other, out)
    return out
