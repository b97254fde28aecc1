"""The README's measured numbers are the results pages' numbers: each number of the README's results (a decimal, or
an integer of four digits or more) appears in a results page that its section links, so a README cannot drift from
the tables it summarises. A number measured anew goes into results/ first, then into the README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# 74.60, 317,234, 1.8-1.9x, 0.40 s: a decimal, or an integer of 4+ digits (thousands commas allowed). Version
# numbers (torch==2.13.0), commit hashes and file names are no measurements: they are left out below.
NUMBER = re.compile(r"(?<![\w.=/])(?<![A-Za-z]-)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d{4,})(?![\w.]*[=/])(?!\.\d)")
NOT_MEASURED = re.compile(r"`[^`]*`|\[[^\]]*\]\([^)]*\)|https?://\S+|==[\d.]+")


def numbers(text: str) -> set[str]:
    """The measurement-like numbers of `text`, normalised: no thousands commas, no trailing zeros after a point."""
    found = set()
    for raw in NUMBER.findall(NOT_MEASURED.sub(" ", text)):
        value = raw.replace(",", "")
        if "." in value:
            value = value.rstrip("0").rstrip(".")
        found.add(value)
    return found


def page_numbers(text: str) -> set[str]:
    """Every number a results page holds (code and links included: a command line may state it)."""
    return {
        (value.rstrip("0").rstrip(".") if "." in value else value)
        for value in (raw.replace(",", "") for raw in NUMBER.findall(text))
    }


def sections(text: str) -> list[tuple[str, str]]:
    """(title, text) of each `###` section under `## Results`, and of the opening bullets (which link #results)."""
    opening = text.split("\n## ", 1)[0]
    results = text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### (.+)$", results, flags=re.M)
    found = [("opening", opening), ("results", parts[0])]
    found += [(parts[index], parts[index + 1]) for index in range(1, len(parts), 2)]
    return found


def linked_results(text: str) -> list[Path]:
    return sorted({ROOT / "results" / name for name in re.findall(r"\(results/([\w.-]+\.md)", text)})


def missing_numbers(readme: str) -> dict[str, list[str]]:
    """Per README section: its numbers that no results page it links holds (the opening: any page of Results)."""
    every_page = linked_results(readme.split("\n## Results", 1)[1].split("\n## ", 1)[0])
    missing = {}
    for title, text in sections(readme):
        pages = every_page if title in ("opening", "results") else linked_results(text) or every_page
        held = set().union(*(page_numbers(page.read_text(encoding="utf-8")) for page in pages))
        absent = sorted(numbers(text) - held)
        if absent:
            missing[title] = absent
    return missing


def test_every_readme_number_is_in_a_results_page_it_links():
    assert missing_numbers(README.read_text(encoding="utf-8")) == {}


def test_a_number_not_in_the_results_is_found(tmp_path):
    page = ROOT / "results" / "speed.md"
    held = sorted(page_numbers(page.read_text(encoding="utf-8")), key=len)[-1]
    readme = (
        "# x\n\n- fast: 987,654.5 sentences/s ([results](#results)).\n\n## Results\n\n### Speed\n\n"
        f"| a | {held} |\n| b | 123.45 |\n\nSee [results/speed.md](results/speed.md).\n\n## Other\n"
    )
    assert missing_numbers(readme) == {"Speed": ["123.45"], "opening": ["987654.5"]}
    assert numbers("`torch==2.13.0`, commit 381bf0c, 1.8-1.9x, 317,234, bge-m3.5 and 74.60") == {
        "1.8",
        "1.9",
        "317234",
        "74.6",
    }
