"""Checks of the teacher settings (distillation, multilingual distillation, teacher-aware negatives, init)."""

from __future__ import annotations

from pathlib import Path

from ..errors import PSPInputError


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
        from .distill import parse_corpus_weights

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
