"""Imports point one way: the types, text, core and game layers never import the
token bridge, the GEM facade, training, the testing kit or the CLI; inside the
bridge, parsing and rendering are separate stages under ``bridge.py``
(docs/architecture.md, Layers). Read from the source, so a lazy import inside a
function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gemjax"
ABOVE = (
    "gemjax.tokenizer_bridge",
    "gemjax.gem",
    "gemjax.train",
    "gemjax.testing",
    "gemjax.cli",
)
# Each lower layer, and what it may import from gemjax besides itself.
LOWER = {
    "types.py": (),
    "text": ("gemjax.types",),
    "core.py": ("gemjax.types", "gemjax.checks", "gemjax.spaces", "gemjax.text"),
    "envs": None,  # anything below the bridge
    "registry.py": None,
    "spaces.py": None,
    "rng.py": None,
    "checks.py": None,
    "bitset.py": None,
    "lanes.py": (),
}
# The token bridge's stages: each may import the bridge's shared modules and the
# layers below the bridge, never another stage, ``bridge.py``, or a layer above.
BRIDGE = "gemjax.tokenizer_bridge"
BRIDGE_SHARED = (f"{BRIDGE}.device_types", f"{BRIDGE}.tokenizers")
BRIDGE_STAGES = ("parse", "render")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (``from a.b import c`` counts ``a.b`` and
    ``a.b.c``), at any depth of the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def files_of(entry: str) -> list[Path]:
    path = PACKAGE / entry
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("entry", sorted(LOWER))
def test_lower_layers_import_nothing_above(entry: str) -> None:
    own = "gemjax." + entry.removesuffix(".py")
    for path in files_of(entry):
        for name in imported_modules(path):
            assert not any(within(name, above) for above in ABOVE), (path, name)
            allowed = LOWER[entry]
            if allowed is not None and within(name, "gemjax") and not within(name, own):
                assert any(within(name, a) for a in allowed), (path, name)


@pytest.mark.parametrize("stage", BRIDGE_STAGES)
def test_bridge_stages_import_only_below_them(stage: str) -> None:
    own = f"{BRIDGE}.{stage}"
    paths = files_of(f"tokenizer_bridge/{stage}")
    assert paths
    for path in paths:
        for name in imported_modules(path):
            if within(name, own) or not within(name, "gemjax"):
                continue
            assert not any(within(name, above) for above in ABOVE if above != BRIDGE), (path, name)
            if within(name, BRIDGE):
                assert any(within(name, shared) for shared in BRIDGE_SHARED), (path, name)


def test_the_check_sees_imports() -> None:
    """The scan finds module-level and nested imports alike."""
    names = imported_modules(PACKAGE / "text" / "templates.py")
    assert "gemjax.types" in names and "gemjax.types.Event" in names
    # cli.py imports gemjax.gem only inside its command functions.
    assert any(within(n, "gemjax.gem") for n in imported_modules(PACKAGE / "cli.py"))
