"""The project can be cited and reused: a licence file the package metadata names, a
CITATION.cff, and every reproduced paper's full reference in docs/reproducing.md."""

from __future__ import annotations

import tomllib
from importlib.metadata import metadata

import yaml

from gnntrain.repro import CHECKOUT
from gnntrain.repro.papers import PAPERS


def test_the_licence_is_one_file_the_package_metadata_and_the_citation_name() -> None:
    licence = (CHECKOUT / "LICENSE").read_text()
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((CHECKOUT / "CITATION.cff").read_text())
    assert licence.startswith("MIT License")
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert metadata("gnntrain")["License-Expression"] == "MIT", "what pip show gnntrain prints"
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "MIT"
    assert citation["title"].startswith("gnntrain") and citation["version"] == project["version"]


def test_every_reproduced_paper_has_its_full_reference_in_the_docs() -> None:
    docs = (CHECKOUT / "docs" / "reproducing.md").read_text()
    references = docs.split("## References", 1)[1]
    for paper in PAPERS.values():
        assert paper.reference in references, paper.name
        assert "http" in paper.reference and any(year in paper.reference for year in ("2022", "2023", "2024", "2025"))
