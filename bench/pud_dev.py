"""PUD dev accuracy of psp models, language by language, as `psp train --dev-bitext` scores its dev set.

    PSP_DATA=../shared/data python bench/pud_dev.py --model p-sp-multilingual=OUT/multilingual/model \
        --model ar=OUT/ar/model --model zh=OUT/zh/model

A model named after a language (`ar=FOLDER`) is one language's: it is scored on that language's PUD pairs only.
Any other name is scored on every language of --langs. Accuracy is the mean of both directions' nearest-cosine
retrieval among the 1,000 pairs (100 minus Tatoeba's error rate, computed the same way).
"""

from __future__ import annotations

import argparse

LANGUAGES = ("ar", "de", "es", "fr", "ru", "tr", "zh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, metavar="NAME=FOLDER", help="repeatable")
    parser.add_argument("--langs", default=",".join(LANGUAGES), help="comma-separated (default: the seven)")
    parser.add_argument("--data", default=None, help="the data folder (default $PSP_DATA or ../shared/data)")
    args = parser.parse_args()
    if any("=" not in entry for entry in args.model):
        parser.error("--model takes NAME=FOLDER, e.g. ar=OUT/ar/model")

    from psp_hf import load
    from psp_hf.data.sources.language_sources import dev_file
    from psp_hf.data_folder import existing_data_dir
    from psp_hf.training.data.bitext_teacher import mining_accuracy
    from psp_hf.training.data.multilingual import read_dev_pairs

    data = existing_data_dir(args.data)
    languages = [code.strip() for code in args.langs.split(",") if code.strip()]
    pairs = {code: read_dev_pairs(dev_file(data, code), code) for code in languages}
    print("| model | " + " | ".join(languages) + " | mean |")
    print("|---|" + "---|" * (len(languages) + 1))
    for name, folder in (entry.split("=", 1) for entry in args.model):
        encoder = load(folder)
        scored = {code: mining_accuracy(encoder, pairs[code]) for code in model_languages(name, languages)}
        print(table_row(name, languages, scored))


def model_languages(name: str, languages: list[str]) -> list[str]:
    """The languages a model is scored on: its own when it is named after one of them, else all."""
    return [name] if name in languages else list(languages)


def table_row(name: str, languages: list[str], scored: dict[str, float]) -> str:
    """One row: each language's accuracy (— where not scored), and the mean of those scored."""
    cells = [f"{scored[code]:.2f}" if code in scored else "—" for code in languages]
    return f"| {name} | " + " | ".join(cells) + f" | {sum(scored.values()) / len(scored):.2f} |"


if __name__ == "__main__":
    main()
