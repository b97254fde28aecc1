"""The teacher settings of `TrainingArguments` (distillation, teacher-aware negatives, the teacher's vectors, rows
from another model) and their checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import PSPInputError
from ...teachers.combine import WHITEN_SHRINK
from .checks import setting


@dataclass
class TeacherArguments:
    """The teacher settings of `TrainingArguments`."""

    teacher_cache: str | None = field(
        default=None,
        metadata=setting(
            "folder of teacher embeddings made by `psp prepare label`: its sentences "
            "form a second stream of (sentence, teacher vector) batches for the distillation loss",
            fixed_on_resume=True,
        ),
    )
    distill_weight: float = field(
        default=0.0,
        metadata=setting(
            "weight of the distillation loss mean(1 - cos(W student(s), teacher(s))); W is a learned "
            "linear map (no bias) when --dim differs from the teacher's dim. It only shapes training: "
            "the saved model is the plain student table, without W (0: no distillation)",
            min=0,
        ),
    )
    margin_weight: float = field(
        default=1.0,
        metadata=setting(
            "weight of the margin loss on the pairs (0 with --teacher-cache: distillation only, "
            "over the distillation corpus; without --data the margin loss is off)",
            min=0,
        ),
    )
    distill_batch_size: int = field(
        default=1024, metadata=setting("corpus sentences per distillation batch", min=1, fixed_on_resume=True)
    )
    corpus_weights: str | None = field(
        default=None,
        metadata=setting(
            "how often each source of the distillation corpus is drawn in a pass, e.g. "
            "'wikipedia-2015=0.5,wordnet-glosses=2' (sources as the corpus's report.json names them; others keep 1)",
            fixed_on_resume=True,
        ),
    )
    teacher_negative_threshold: float | None = field(
        default=None,
        metadata=setting(
            "the miner skips a negative whose teacher cosine with the anchor is at least this (a true "
            "paraphrase); needs --teacher-cache; sentences the cache lacks are not filtered",
            min=-1,
            max=1,
            pairs_only=True,
        ),
    )
    teacher_transform: str = field(
        default="none",
        metadata=setting(
            "what the teacher vectors the run reads (the corpus, or bitext and monolingual text) go through before "
            "distilling: none; center (less their mean); whiten (centred, every principal direction scaled to "
            "equal variance). For teachers whose vectors share one large direction (multilingual-e5: unrelated "
            "sentences at cosine 0.75), which the cosine loss would otherwise spend itself on",
            choices=("none", "center", "whiten"),
            fixed_on_resume=True,
        ),
    )
    teacher_whiten_shrink: float = field(
        default=WHITEN_SHRINK,
        metadata=setting(
            "with --teacher-transform whiten, the shrinkage S: each principal direction is scaled by "
            "1/sqrt(variance + S x the mean variance), so directions with next to no variance stay small. On STS-B "
            "dev S = 1 was ahead of 0.1 for both English teachers (results/teachers-english.md)",
            min=0,
            fixed_on_resume=True,
        ),
    )
    teacher: str | None = field(
        default=None,
        metadata=setting(
            "multilingual distillation of bitext: this sentence-transformers teacher (path or Hub id; 'default': "
            "all-MiniLM-L6-v2; or e5-small, e5-small-query, use-multilingual, e5-small+use-multilingual: "
            "docs/teachers.md) "
            "labels the sentences into --teacher-cache (default OUTPUT_DIR/training/teacher-labels; labelled once, "
            "resumable); both sides of a pair learn its vectors as --bitext-targets says (an English-only teacher: "
            "teacher(English side)); implies --distill-weight 1 unless given",
            fixed_on_resume=True,
        ),
    )
    init_rows_from: str | None = field(
        default=None,
        metadata=setting(
            "copy the rows of pieces this psp model's vocabulary shares (e.g. the English model)", fixed_on_resume=True
        ),
    )


def validate_teacher_settings(args) -> None:
    """Raise `PSPInputError` naming the flag when the teacher settings of `args` (`TrainingArguments`) clash.

    `--teacher` fills in what it implies: `--distill-weight 1` when none is given, and the cache folder.
    """
    if args.teacher and not args.distill_weight:
        args.distill_weight = 1.0  # --teacher means distillation
    if args.teacher and args.resolved_kind() != "bitext":
        raise PSPInputError("--teacher labels the English side of bitext: it needs --lang xx (or --kind bitext)")
    if args.teacher and not args.teacher_cache:
        args.teacher_cache = str(Path(args.output_dir) / "training" / "teacher-labels")
    if args.dev == "bitext" and args.resolved_kind() != "bitext":
        raise PSPInputError("--dev bitext holds back pairs of X-English bitext: it needs --lang xx")
    if args.distill_weight > 0 and not args.teacher_cache:
        raise PSPInputError("--distill-weight needs --teacher-cache (a folder made by psp prepare label)")
    if args.teacher_cache and not args.teacher and not Path(args.teacher_cache).is_dir():
        raise PSPInputError(f"--teacher-cache {args.teacher_cache}: no such folder")
    if args.teacher_cache and args.distill_weight == 0 and (args.margin_weight == 0 or not args.data):
        raise PSPInputError(
            "distillation only (no --data or --margin-weight 0) needs --distill-weight > 0, e.g. --distill-weight 1"
        )
    if args.data and args.margin_weight == 0 and args.distill_weight == 0:
        raise PSPInputError("--margin-weight 0 and --distill-weight 0: nothing to train")
    if args.corpus_weights:
        from ..data.teacher_corpus import parse_corpus_weights

        parse_corpus_weights(args.corpus_weights)  # a malformed value fails here, before anything is loaded
        if not args.teacher_cache or args.teacher:
            raise PSPInputError(
                "--corpus-weights weights the sources of the English distillation corpus: it needs --teacher-cache of "
                "a labelled corpus (bitext's --teacher labels no corpus)"
            )
    if args.teacher_negative_threshold is not None:
        if not args.teacher_cache:
            raise PSPInputError("--teacher-negative-threshold needs --teacher-cache (the teacher's vectors)")
        if args.pair_distill():
            raise PSPInputError(
                "--teacher-negative-threshold needs teacher vectors of both sides; in multilingual distillation "
                "only the English side has one"
            )
        if args.distill_only():
            raise PSPInputError(
                "--teacher-negative-threshold filters the margin loss's negatives: it needs "
                "--data and --margin-weight > 0"
            )
    if args.init == "word-vectors" and not args.init_vectors:
        raise PSPInputError("--init word-vectors needs --init-vectors FILE")
    if args.init_vectors and args.init != "word-vectors":
        raise PSPInputError("--init-vectors is only used with --init word-vectors")
    if args.init_vectors and not Path(args.init_vectors).is_file():
        raise PSPInputError(f"--init-vectors {args.init_vectors}: no such file")
    if args.init_from and (args.init != "random" or args.tokenizer):
        raise PSPInputError("--init-from brings its own table and tokenizer: drop --init and --tokenizer")
    if args.init_rows_from and args.init_from:
        raise PSPInputError("--init-rows-from and --init-from both set the table: give one")
    if args.teacher_model and args.init != "teacher":
        raise PSPInputError("--teacher-model is only used with --init teacher")
