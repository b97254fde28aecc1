"""The word cache's C Unigram search (`psp_hf.inference.unigram`) against the `tokenizers` library, on the distinct
words of a text file: how many words each cuts, in how many seconds, and how many words they cut differently.

    python bench/unigram.py --model demo_out/p-sp-en-distilled --text wiki1m.txt [--lines 1000000]

The words are those the word cache would store: whitespace-separated, ASCII letters lowercased. The library cuts
them as `WordTokenizer.tokenize_with_library` does (4,096 words a string, its own threads) and, for the check, one
word per encoding. The C search cuts the words it is allowed to (printable ASCII the normalizer keeps), one thread.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path


def distinct_words(path: Path, lines: int) -> list[bytes]:
    """The distinct words of the file's first `lines` lines, ASCII letters lowercased, in first-seen order."""
    upper = bytes(range(65, 91))
    table = bytes.maketrans(upper, upper.lower())
    words: dict[bytes, None] = {}
    with open(path, "rb") as handle:
        for line in itertools.islice(handle, lines):
            for word in line.translate(table).split():
                words.setdefault(word, None)
    return list(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a psp model folder (its tokenizer.json)")
    parser.add_argument("--text", required=True, type=Path, help="a text file, one sentence a line")
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()

    from tokenizers import Tokenizer

    from psp_hf.inference.unigram import UnigramWords
    from psp_hf.inference.word_tokenizer import WordTokenizer

    backend = Tokenizer.from_file(str(Path(args.model) / "tokenizer.json"))
    started = time.perf_counter()
    search = UnigramWords.for_backend(backend)
    if search is None:
        raise SystemExit("this tokenizer does not allow the C search (or the kernel was not built)")
    built = time.perf_counter() - started
    words = distinct_words(args.text, args.lines)
    eligible = search.eligible(words)
    chosen = [word for word, ok in zip(words, eligible.tolist(), strict=True) if ok]

    started = time.perf_counter()
    bounds, pieces = search.segment(chosen)
    c_seconds = time.perf_counter() - started
    started = time.perf_counter()
    WordTokenizer(backend).tokenize_with_library(chosen)
    library_seconds = time.perf_counter() - started
    encodings = backend.encode_batch_fast([word.decode() for word in chosen], add_special_tokens=False)
    differ = sum(encoding.ids != pieces[bounds[k] : bounds[k + 1]].tolist() for k, encoding in enumerate(encodings))

    print(f"{len(words):,} distinct words in {args.lines:,} lines; {len(chosen):,} for the C search")
    print(f"search built in {built:.3f} s\n")
    print("| cut by | seconds | µs a word |\n|---|---|---|")
    print(f"| C search, one thread | {c_seconds:.3f} | {1e6 * c_seconds / len(chosen):.2f} |")
    per_word = 1e6 * library_seconds / len(chosen)
    print(f"| tokenizers, as WordTokenizer called it | {library_seconds:.3f} | {per_word:.2f} |")
    print(f"\nwords cut differently from the library (one word an encoding): {differ:,}")


if __name__ == "__main__":
    main()
