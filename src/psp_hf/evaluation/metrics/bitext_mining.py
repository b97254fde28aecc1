"""Bitext mining error rate: nearest cosine neighbour retrieval between the two sides of a parallel set.

An `evaluate` metric module; load it by path so it works offline:

>>> import evaluate
>>> metric = evaluate.load("src/psp_hf/evaluation/metrics/bitext_mining.py")
>>> metric.compute(source_embeddings=source, target_embeddings=target)
{'error_rate': 0.05, 'error_rate_source_to_target': 0.04, 'error_rate_target_to_source': 0.06, 'n': 1000}

Row i of the source side is the translation of row i of the target side. Cosines come from
`psp_hf.inference.similarity` (an absolute import, which `evaluate` resolves from the installed package), the project's
one cosine module.
"""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

from psp_hf.inference.similarity import cosine_matrix

_DESCRIPTION = """\
Bitext mining as in the Tatoeba evaluation of Artetxe & Schwenk (2019, LASER): every sentence of one side
retrieves its nearest neighbour by cosine similarity among all sentences of the other side; a retrieval is an
error unless it returns the sentence's own translation (the row with the same index). The error rate is
computed in both directions and `error_rate` is their mean. When several candidates have exactly the same
similarity, the one with the lowest index is retrieved. Zero vectors have cosine 0 with everything.
"""

_KWARGS_DESCRIPTION = """\
Args:
    source_embeddings (`list` of `list` of `float`): one embedding per source sentence.
    target_embeddings (`list` of `list` of `float`): one embedding per target sentence; row i is the
        translation of source row i. Both sides have the same dimension.
Returns:
    error_rate (`float`): mean of the two directions, in [0, 1].
    error_rate_source_to_target (`float`): fraction of source rows whose nearest target is not their pair.
    error_rate_target_to_source (`float`): fraction of target rows whose nearest source is not their pair.
    n (`int`): number of pairs.
"""

_CITATION = """\
@article{artetxe-schwenk-2019-massively,
  title = {Massively Multilingual Sentence Embeddings for Zero-Shot Cross-Lingual Transfer and Beyond},
  author = {Artetxe, Mikel and Schwenk, Holger},
  journal = {Transactions of the Association for Computational Linguistics},
  volume = {7},
  year = {2019},
}
"""


def nearest_neighbour_errors(source: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """Error rates (source->target, target->source) of nearest-cosine-neighbour retrieval."""
    source = np.atleast_2d(np.asarray(source, dtype=np.float32))
    target = np.atleast_2d(np.asarray(target, dtype=np.float32))
    if source.shape != target.shape:
        raise ValueError(
            f"source and target embeddings must have the same shape, got {source.shape} and {target.shape}"
        )
    n = len(source)
    if n == 0:
        raise ValueError("bitext mining needs at least one pair")
    similarity = cosine_matrix(source, target)
    gold = np.arange(n)
    # argmax returns the first maximum, which makes ties resolve the same way on every run.
    source_to_target = float(np.mean(np.argmax(similarity, axis=1) != gold))
    target_to_source = float(np.mean(np.argmax(similarity, axis=0) != gold))
    return source_to_target, target_to_source


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BitextMining(evaluate.Metric):
    """Error rate of nearest-cosine-neighbour bitext retrieval, in both directions."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "source_embeddings": datasets.List(datasets.Value("float32")),
                    "target_embeddings": datasets.List(datasets.Value("float32")),
                }
            ),
            reference_urls=["https://github.com/facebookresearch/LASER/tree/main/data/tatoeba/v1"],
        )

    def _compute(self, source_embeddings, target_embeddings) -> dict:
        source_to_target, target_to_source = nearest_neighbour_errors(source_embeddings, target_embeddings)
        return {
            "error_rate": (source_to_target + target_to_source) / 2.0,
            "error_rate_source_to_target": source_to_target,
            "error_rate_target_to_source": target_to_source,
            "n": int(len(source_embeddings)),
        }
