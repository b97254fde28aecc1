"""PPDB-XL lexical paraphrases (the ICLR 2016 paper's word-level supervision) as training pairs.

The file (`paraphrase/en/ppdb-xl-lexical/ppdb-xl.txt.gz` in the data folder, as prepared for retrofitting) has
one head word per line followed by its paraphrases, separated by spaces. Each (head, paraphrase) is a pair; a
pair listed in both directions is kept once. Use the pairs directly (`psp_hf.training.train(args, data=pairs)`)
or write them as a headed TSV for `psp train --data`:

    python -m psp_hf.data.sources.ppdb PPDB.txt.gz -o ppdb-pairs.tsv.gz
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import sys
from collections.abc import Iterator

from ...errors import PSPInputError

logger = logging.getLogger(__name__)


def ppdb_pairs(path: str | os.PathLike, limit: int | None = None) -> Iterator[tuple[str, str]]:
    """(word, paraphrase) pairs of a lexical PPDB file, each unordered pair once, in file order."""
    from ...io.reading import iter_raw_lines

    seen: set[tuple[str, str]] = set()
    for number, raw in iter_raw_lines(path):
        try:
            words = raw.decode("utf-8").split()
        except UnicodeDecodeError:
            raise PSPInputError(f"{path}:{number}: not UTF-8") from None
        if not words:
            continue
        head = words[0]
        for other in words[1:]:
            key = (head, other) if head <= other else (other, head)
            if other == head or key in seen:
                continue
            seen.add(key)
            yield head, other
            if limit is not None and len(seen) >= limit:
                return


def write_ppdb_tsv(path: str | os.PathLike, output: str | os.PathLike, limit: int | None = None) -> int:
    """Write the pairs of `path` as a `sentence1<TAB>sentence2` TSV (gzip for .gz), atomically; returns the count."""
    from ...io.writing import atomic_path

    count = 0
    with atomic_path(output) as temporary:
        opener = gzip.open if os.fspath(output).endswith(".gz") else open
        with opener(temporary, "wt", encoding="utf-8") as handle:
            handle.write("sentence1\tsentence2\n")
            for first, second in ppdb_pairs(path, limit):
                handle.write(f"{first}\t{second}\n")
                count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    """`python -m psp_hf.data.sources.ppdb INPUT -o OUTPUT.tsv[.gz] [--limit N]`."""
    parser = argparse.ArgumentParser(prog="python -m psp_hf.data.sources.ppdb", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="lexical PPDB file (.gz ok)")
    parser.add_argument("-o", "--output", required=True, help="TSV of pairs to write (.gz ok)")
    parser.add_argument("--limit", type=int, default=None, help="stop after this many pairs")
    args = parser.parse_args(argv)
    from ...logs import show_on_stderr

    show_on_stderr()
    try:
        count = write_ppdb_tsv(args.input, args.output, args.limit)
    except (PSPInputError, FileNotFoundError) as error:
        logger.error("psp: error: %s", error)
        return 2
    logger.info("%d pairs -> %s", count, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
