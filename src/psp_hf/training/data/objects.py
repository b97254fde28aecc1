"""Training pairs handed over as Python objects: a `datasets` dataset or a list of `(sentence, paraphrase)` pairs.

Each becomes an unshuffled `datasets.IterableDataset`, so the stream (seeded shuffle buffer, split across
processes, position kept for --resume) is the same as for files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import PSPInputError

PAIR_COLUMNS = ("sentence1", "sentence2")


def _is_datasets_object(data: Any) -> bool:
    module = type(data).__module__ or ""
    return module.startswith("datasets.")


def describe_data_object(data: Any) -> str:
    """A short label of the object (recorded as the run's `data` setting)."""
    if _is_datasets_object(data):
        kind = type(data).__name__
        rows = f"{data.num_rows} rows, " if hasattr(data, "num_rows") and isinstance(data.num_rows, int) else ""
        names = getattr(data, "column_names", None)
        if isinstance(names, dict):  # DatasetDict: split -> names
            return f"<datasets.{kind}: splits {', '.join(names)}>"
        columns = f"columns {', '.join(names)}" if names else "columns unknown"
        return f"<datasets.{kind}: {rows}{columns}>"
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return f"<list of {len(data)} pairs>"
    raise PSPInputError(
        f"data: expected a datasets.Dataset, IterableDataset, DatasetDict or a list of (sentence, paraphrase) "
        f"pairs, got {type(data).__name__}"
    )


def _pairs_dataset(pairs: Sequence):
    from datasets import Dataset

    first: list[str] = []
    second: list[str] = []
    for index, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise PSPInputError(f"data[{index}]: expected a (sentence, paraphrase) pair, got {pair!r:.80}")
        a, b = pair
        if not (isinstance(a, str) and isinstance(b, str)):
            raise PSPInputError(
                f"data[{index}]: both sides must be strings, got {type(a).__name__}, {type(b).__name__}"
            )
        first.append(a)
        second.append(b)
    if not first:
        raise PSPInputError("data: the list of pairs is empty")
    return Dataset.from_dict({PAIR_COLUMNS[0]: first, PAIR_COLUMNS[1]: second})


def iterable_from_object(data: Any, split: str = "train"):
    """The object as an unshuffled `datasets.IterableDataset` (a `DatasetDict` gives its `split`)."""
    from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict

    if isinstance(data, (DatasetDict, IterableDatasetDict)):
        if split not in data:
            raise PSPInputError(f"data: no split {split!r} in the DatasetDict (splits: {', '.join(data)})")
        data = data[split]
    if isinstance(data, IterableDataset):
        return data
    if not isinstance(data, Dataset):
        data = _pairs_dataset(data)
    if data.num_rows == 0:
        raise PSPInputError("data: the dataset has no rows")
    # Several shards let several processes each read their own (split_dataset_by_node); one is enough otherwise.
    return data.to_iterable_dataset(num_shards=min(8, data.num_rows))
