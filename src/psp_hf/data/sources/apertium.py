"""English sentences translated into X by Apertium, the rule-based translator Debian ships with its language data.

Debian has Apertium's English–Spanish pair (apertium-eng-spa) and its French–Spanish pair (apertium-fr-es), and
no English pair for the other five languages: Spanish is translated from English directly, French through
Spanish. The programs (apertium, lttoolbox, apertium-lex-tools) and their libraries are unpacked, not installed
(`make registry-bitext`); a mode file names each step of a translation with absolute /usr/share paths, which
are read from the unpacked root instead, and the steps run with the root's bin and lib folders searched first.

Apertium marks what it could not translate: `*word` (unknown to the analyser), `@word` (no entry in the bilingual
dictionary), `#word` (no generated form). The marks are removed; a translation with more than
`MAX_UNKNOWN_SHARE` of its words marked is dropped, since it is mostly English left as it was.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from ...errors import PSPInputError

# The translation steps (Apertium mode names) from English into each language that Debian's packages allow.
APERTIUM_MODES = {"es": ("eng-spa",), "fr": ("eng-spa", "es-fr")}
# Packages whose data the modes read; their copyright files give the licence of the translations' source code.
APERTIUM_DATA_PACKAGES = {"eng-spa": "apertium-eng-spa", "es-fr": "apertium-fr-es"}
MAX_UNKNOWN_SHARE = 0.25
CHUNK_LINES = 20_000  # lines per pipeline run: enough that starting a mode's ten or so programs costs little
_MARK = re.compile(r"(?<!\w)[*@#](?=\w)")


def modes_folder(root: Path) -> Path:
    return root / "usr" / "share" / "apertium" / "modes"


def available(lang: str, root: Path) -> bool:
    """Whether the programs and every mode file that translating into `lang` needs are under `root`."""
    modes = APERTIUM_MODES.get(lang)
    if not modes or not (root / "usr" / "bin" / "lt-proc").is_file():
        return False
    return all((modes_folder(root) / f"{mode}.mode").is_file() for mode in modes)


def mode_command(root: Path, mode: str) -> str:
    """The shell pipeline of one mode, its data read from under `root`.

    `$1` and `$2` are the options the `apertium` script would fill in: `-g` (generate, marking unknown words)
    and nothing (no tagger option)."""
    path = modes_folder(root) / f"{mode}.mode"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PSPInputError(f"{path}: cannot read the Apertium mode ({error}); run `make registry-bitext`") from error
    share = str(root / "usr" / "share" / "apertium")
    return text.strip().replace("/usr/share/apertium", share).replace("$1", "-g").replace("$2", "")


def tool_environment(root: Path) -> dict[str, str]:
    """The environment that runs the unpacked programs with their unpacked libraries."""
    env = dict(os.environ)
    libraries = [str(path) for path in sorted((root / "usr" / "lib").glob("*-linux-gnu"))]
    env["PATH"] = os.pathsep.join([str(root / "usr" / "bin"), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libraries, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    return env


def clean_translation(text: str) -> tuple[str, int]:
    """The translation with Apertium's marks removed, and how many words were marked."""
    marked = len(_MARK.findall(text))
    return " ".join(_MARK.sub("", text).split()), marked


def _run(command: str, lines: list[str], env: dict[str, str]) -> list[str] | None:
    """`lines` through `command` (plain text in and out): one output line per input line, or None when the
    pipeline did not keep the line count (a chunk is then split until the line that breaks it is found)."""
    text = "".join(line.replace("\n", " ") + "\n" for line in lines)
    pipeline = f"apertium-destxt | {command} | apertium-retxt"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], input=text, capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise PSPInputError(f"Apertium failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
    out = result.stdout.split("\n")
    if out and out[-1] == "":
        out.pop()
    return out if len(out) == len(lines) else None


def _translate_step(command: str, lines: list[str], env: dict[str, str]) -> list[str | None]:
    if not lines:
        return []
    out = _run(command, lines, env)
    if out is not None:
        return list(out)
    if len(lines) == 1:
        return [None]
    half = len(lines) // 2
    return _translate_step(command, lines[:half], env) + _translate_step(command, lines[half:], env)


def translate(
    sentences: Iterable[str], lang: str, root: Path, chunk_lines: int = CHUNK_LINES
) -> Iterator[tuple[str, str]]:
    """(translation, English) pairs of `sentences`, in order; a sentence whose translation broke the line
    alignment or kept more than `MAX_UNKNOWN_SHARE` of its words untranslated is left out."""
    if not available(lang, root):
        raise PSPInputError(
            f"no Apertium translation into {lang!r} under {root} (Debian has {', '.join(APERTIUM_MODES)}); "
            "unpack the packages first (make registry-bitext)"
        )
    commands = [mode_command(root, mode) for mode in APERTIUM_MODES[lang]]
    env = tool_environment(root)
    chunk: list[str] = []
    for sentence in sentences:
        sentence = " ".join(sentence.split())
        if sentence:
            chunk.append(sentence)
        if len(chunk) >= chunk_lines:
            yield from _translate_chunk(chunk, commands, env)
            chunk = []
    yield from _translate_chunk(chunk, commands, env)


def _translate_chunk(english: list[str], commands: list[str], env: dict[str, str]) -> Iterator[tuple[str, str]]:
    current: list[str | None] = list(english)
    marked = [0] * len(english)
    for command in commands:
        keep = [i for i, text in enumerate(current) if text]
        out = _translate_step(command, [current[i] for i in keep], env)
        current = [None] * len(english)
        for i, text in zip(keep, out, strict=True):
            if text is not None:
                current[i], count = clean_translation(text)
                marked[i] += count
    for source, text, count in zip(english, current, marked, strict=True):
        if text and count <= MAX_UNKNOWN_SHARE * len(text.split()):
            yield text, source
