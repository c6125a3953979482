"""The generated pages of docs/ say what the code says (``python -m gnntrain.commands.docs`` writes them)."""

from __future__ import annotations

from gnntrain.commands import docs


def test_the_generated_pages_match_the_code() -> None:
    stale = [str(path.relative_to(docs.DOCS.parent)) for path in docs.stale()]
    assert not stale, f"stale generated docs: {', '.join(stale)}; run python -m gnntrain.commands.docs"


def test_every_strategy_has_a_page_with_its_keys() -> None:
    for name in docs.METHODS:
        page = docs.strategy_page(name)
        assert page.startswith(docs.GENERATED) and f"# `strategy={name}`" in page
        for key in docs.dataclasses.fields(docs.method(name).config):
            assert key.name == "name" or f"`strategy.{key.name}`" in page
