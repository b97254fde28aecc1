"""The documentation: every relative link resolves, and docs/cli.md is what the parsers generate now."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from psp_hf.cli import reference as cli_reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "results").glob("*.md"))]

# [text](target) outside code; images too. A target may carry a "title" after a space.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed (links there are not links)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercased, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").strip().lower()
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "-_" or category[0] in "LN" or category == "Mn":
            kept.append(char)
        elif char == " ":
            kept.append("-")
    return "".join(kept)


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    result = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a page (no scheme, no mailto)."""
    targets = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                targets.append(target)
    return targets


def test_slugs_follow_github():
    assert github_slug("`psp embed-dataset`: resumable shards, several processes") == (
        "psp-embed-dataset-resumable-shards-several-processes"
    )
    assert github_slug("Measured: the seven models (`psp languages`)") == "measured-the-seven-models-psp-languages"
    assert github_slug("A stronger teacher: all-mpnet-base-v2") == "a-stronger-teacher-all-mpnet-base-v2"


def test_the_pages_exist():
    names = {path.relative_to(ROOT).as_posix() for path in PAGES}
    assert {"README.md", "docs/cli.md", "docs/train.md", "results/english.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path):
    broken = []
    for target in relative_links(page):
        file_part, _, fragment = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {destination.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_link_checker_finds_a_broken_link(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nothing) [gone](missing.md)\n```\n[code](not-a-link.md)\n```\n")
    assert relative_links(page) == ["#title", "#nothing", "missing.md"]
    assert anchors(page) == {"title"}


def test_cli_reference_matches_the_parsers():
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == cli_reference.reference(), (
        "docs/cli.md is out of date: run `python -m psp_hf.cli.reference > docs/cli.md`"
    )


def test_cli_reference_lists_every_command_and_flag():
    text = cli_reference.reference()
    for command in ("psp embed", "psp train", "psp prepare bitext", "psp prepare label", "psp languages"):
        assert f"`{command}`" in text
    assert "--matryoshka-dims" in text and "--skip-bad-lines" in text
