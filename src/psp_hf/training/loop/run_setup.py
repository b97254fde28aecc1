"""Setting a run up: checks before any work, Accelerate, the data streams, tokenizer, model, optimizers, resume."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...errors import PSPInputError
from ...io.writing import check_no_links

# RESUME_FIXED: the fields whose metadata says fixed_on_resume (they change the data order or the model).
from ..arguments.training_arguments import DEV_SPLITS, RESUME_FIXED, TrainingArguments
from ..reporting.metrics_log import MetricsLog
from .checkpoint import CheckpointStore, TrainState
from .miner import make_miner

if TYPE_CHECKING:
    from accelerate import Accelerator
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from ...modeling import PSPModel
    from ..data.bitext_teacher import BitextTeacher
    from ..data.pairs import PairSource, PairStream
    from ..data.teacher_corpus import TeacherCorpus
    from ..losses.matryoshka import NestedDims
    from .miner import MegaBatchMiner

logger = logging.getLogger(__name__)


def check_output_dir(output_dir: Path) -> None:
    """Refuse an output folder that cannot be written, before any work (creating nothing)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise PSPInputError(f"--output {output_dir}: exists and is not a folder")
    existing = output_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise PSPInputError(f"--output {output_dir}: cannot write there ({existing} is not a folder)")
    probe = existing / f".write-test-{os.getpid()}"
    try:  # access() says yes to root on a read-only file system: try a real write
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise PSPInputError(f"--output {output_dir}: cannot write there ({error.strerror or error})") from None


class RunSetup:
    """Everything a `Trainer` holds before its first step; `_setup()` builds it."""

    def __init__(self, args: TrainingArguments, data=None):
        self.data_object = None
        if data is not None:
            from ..data.objects import describe_data_object

            if args.data:
                raise PSPInputError("training data given twice: as data= and as TrainingArguments.data; give one")
            # args.data records the object's description (args.json, the card, the --resume check).
            self.data_object = data
            args = dataclasses.replace(args, data=[describe_data_object(data)])
        args.validate()
        self.args = args
        self.output_dir = Path(args.output_dir)
        self.training_dir = self.output_dir / "training"
        self.checkpoints = CheckpointStore(self.training_dir)
        self.push_status = 0  # the Hub push's exit status (run_end.finish_run sets it)
        # What a run holds, all of it built by `_setup()` (at the start of `train()`, not here: it does the work).
        # Processes (Accelerate).
        self.accelerator: Accelerator | None = None
        self.is_main = False
        self.rank = 0
        self.world_size = 1
        self.device: torch.device | None = None
        self.metrics: MetricsLog | None = None
        # The data: the pairs, the corpus stream (distillation), the bitext teacher (multilingual distillation).
        self.kind: str | None = None  # the pairs' kind: paraphrase, bitext or mixed (TrainingArguments.resolved_kind)
        self.distill_only = False
        self.source: PairSource | None = None
        self.stream: PairStream | None = None
        self.bitext_teacher: BitextTeacher | None = None
        self.bitext_targets = "en"  # what multilingual distillation pulls each side toward (--bitext-targets)
        # The bitext dev sets (one list of pairs per --dev-bitext file, or the pairs held back from --data).
        self.bitext_dev: list[list[tuple[str, str]]] | None = None
        self.dev_scores: list[float] = []  # the last evaluation's score on each of them
        self.mono_sentences: list[str] = []
        self.corpus: TeacherCorpus | None = None  # or its MonoCorpus subclass (--mono-data)
        self.distilling = False  # a corpus stream with a positive weight
        self.teacher_threshold: float | None = None  # negatives the teacher scores above this are skipped
        # The model and its optimizers.
        self.tokenizer: PreTrainedTokenizerFast | None = None
        self.backend: Tokenizer | None = None  # the tokenizer's fast backend, without padding or truncation
        self.model: PSPModel | None = None
        self.projection: torch.nn.Linear | None = None  # the map into the teacher's space (dims differ)
        self.nested: NestedDims | None = None  # the Matryoshka prefix lengths and weights
        self.sparse = False
        self.encoder_module: torch.nn.Module | None = None  # TrainingEncoder, prepared by Accelerate
        self.optimizers: list[torch.optim.Optimizer] = []
        self.miner: MegaBatchMiner | None = None
        # Progress: the counters a checkpoint saves, and the dev set.
        self.state = TrainState()
        self.dev_split: str | None = None
        self.dev_metric = ""

    def say(self, message: str) -> None:
        if self.is_main and not self.args.quiet:
            logger.info("psp train: %s", message)

    def _setup(self) -> None:
        from accelerate import Accelerator

        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        # Accelerate only sets up several CPU processes (gloo) when told it runs on CPU; without a GPU it does,
        # whatever --cpu says, so `torchrun --nproc_per_node 2 train.py` works as written.
        from ..reporting.trackers import check_installed, parse_report_to

        trackers = parse_report_to(args.report_to)
        check_installed(trackers)
        self.accelerator = accelerator = Accelerator(
            cpu=args.cpu or not torch.cuda.is_available(),
            log_with=trackers or None,
            project_dir=self.training_dir if trackers else None,
        )
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if launched != accelerator.num_processes:
            raise PSPInputError(
                f"launched as {launched} processes but Accelerate set up {accelerator.num_processes}; "
                "each process would train alone. Launch with torchrun or `accelerate launch --multi_gpu`"
            )
        self.is_main = accelerator.is_main_process
        self.rank = accelerator.process_index
        self.world_size = accelerator.num_processes
        self.device = accelerator.device
        self.metrics = MetricsLog(self.training_dir / "metrics.jsonl", enabled=self.is_main)
        resuming = self._check_folder()

        from ..data.pairs import PairSource, PairStream

        self.kind = args.resolved_kind()
        self.distill_only = args.distill_only()
        if args.data:
            self.source = PairSource(
                args.data,
                dataset=self.data_object,
                columns=args.column_pair() or None,
                lang=args.lang,
                split=args.split,
                data_config=args.data_config,
                skip_bad_lines=args.skip_bad_lines,
            )
            if not self.distill_only and not resuming:
                from ..data.language_check import check_declared_language

                check_declared_language(self.source, args.lang, self.kind)
            held_back = self._scan_bitext() if args.resolved_dev() == "bitext" or args.pair_distill() else None
            self.stream = PairStream(
                self.source,
                batch_size=args.batch_size,
                shuffle_buffer=args.shuffle_buffer,
                seed=args.seed,
                rank=self.rank,
                world_size=self.world_size,
                exclude=held_back,
            )
        if self.mono_sentences:  # multilingual distillation's monolingual text: the corpus stream's place
            from ..data.multilingual import MonoCorpus

            self.corpus = MonoCorpus(
                args.mono_data,
                self.mono_sentences,
                self.bitext_teacher.vectors_of(self.mono_sentences),
                self.bitext_teacher.teacher,
                seed=args.seed,
                rank=self.rank,
                world_size=self.world_size,
            )
        elif args.teacher_cache and not args.pair_distill():
            from ..data.teacher_corpus import TeacherCorpus, parse_corpus_weights

            self.corpus = TeacherCorpus(
                args.teacher_cache,
                seed=args.seed,
                rank=self.rank,
                world_size=self.world_size,
                weights=parse_corpus_weights(args.corpus_weights),
            )
            if args.teacher_transform != "none":
                self.corpus.transform(args.teacher_transform, args.teacher_whiten_shrink)
        weight = args.mono_weight if self.mono_sentences else args.distill_weight
        self.distilling = self.corpus is not None and weight > 0
        self.teacher_threshold = args.teacher_negative_threshold if not self.distill_only else None
        self._build_model(resuming)
        # Not registered with Accelerate (it would unpickle the counters in full): the store saves them as JSON.
        self.state = TrainState(positions=[0] * self.world_size)
        if resuming:
            self.checkpoints.load(self.accelerator, self.rank, self.state)
            from .finite import check_loaded_weights

            check_loaded_weights(self.model, self.checkpoints.folder())
            self.metrics.trim_to(self.state.step, self.say)
            state = self.state
            self.say(f"resumed at step {state.step} (epoch {state.epoch + 1}, M={state.megabatch_size})")
        else:
            self.metrics.start_fresh()
        if trackers:
            from ..reporting.trackers import TrackerSink

            self.metrics.sink = TrackerSink(accelerator, args.to_dict())
        self.dev_split = DEV_SPLITS.get(args.resolved_dev()) if self.is_main else None
        self.dev_metric = "dev_bitext_accuracy" if self.bitext_dev else f"dev_{args.resolved_dev()}_pearson"
        if self.dev_split is not None:
            from ...evaluation import sts_dev_score

            sts_dev_score(self.cpu_encoder(), split=self.dev_split, data_dir=args.data_dir)  # fail early if absent

    def _scan_bitext(self) -> set[int]:
        """One pass over the bitext: the dev pairs to hold back and, for distillation, the English sides' labels."""
        from ..data.bitext_teacher import BitextTeacher, pair_key, scan_bitext
        from ..data.multilingual import read_dev_pairs, read_mono_sentences, resolved_targets, run_teacher_name

        args = self.args
        dev = args.resolved_dev() == "bitext"
        lang = args.lang or self.source.first_column
        dev_sets = [read_dev_pairs(path, lang) for path in args.dev_bitext]
        outside = [pair for pairs in dev_sets for pair in pairs]
        distilling = args.pair_distill()
        if distilling:
            self.bitext_targets = resolved_targets(args, run_teacher_name(args))
            args.bitext_targets = self.bitext_targets  # args.json and the card record what auto stood for
        scan = scan_bitext(
            self.source,
            args.dev_pairs if dev and not outside else 0,
            english=distilling,
            foreign=distilling and self.bitext_targets != "en",
            exclude={pair_key(a, b) for a, b in outside},
        )
        if dev:
            if not (outside or scan.dev):
                raise PSPInputError(f"--dev bitext: none of the {scan.pairs} pairs of --data could be held back")
            self.bitext_dev = dev_sets or [scan.dev]
            where = f"{len(outside):,} pairs of --dev-bitext" if outside else f"{len(scan.dev)} of {scan.pairs:,} pairs"
            if len(dev_sets) > 1:
                where += f" ({len(dev_sets)} sets, a checkpoint scored by the mean of their accuracies)"
            self.say(f"dev set: {where} held back (mining accuracy, both directions)")
        if distilling:
            if args.mono_data and args.mono_weight > 0:
                self.mono_sentences = read_mono_sentences(args.mono_data)
            self.bitext_teacher = BitextTeacher.prepare(
                scan.english | scan.foreign | set(self.mono_sentences),
                args.teacher_cache,
                args.teacher,
                self.is_main,
                self.accelerator.wait_for_everyone,
                self.say,
            )
            if args.teacher_transform != "none":
                self.bitext_teacher.transform(args.teacher_transform, args.teacher_whiten_shrink)
            self.bitext_teacher.counts = {
                "english": len(scan.english),
                "other_language": len(scan.foreign),
                "monolingual": len(self.mono_sentences),
            }
        return scan.dev_keys

    def _dev_score(self) -> float | None:
        """The dev score of the current weights (main process): mining accuracy or STS Pearson; None without one."""
        if not self.is_main or (self.bitext_dev is None and self.dev_split is None):
            return None
        if self.bitext_dev is not None:
            from ..data.bitext_teacher import mining_accuracy

            encoder = self.cpu_encoder()
            self.dev_scores = [mining_accuracy(encoder, pairs) for pairs in self.bitext_dev]
            return sum(self.dev_scores) / len(self.dev_scores)
        from ...evaluation import sts_dev_score

        return sts_dev_score(self.cpu_encoder(), split=self.dev_split, data_dir=self.args.data_dir)

    def _check_folder(self) -> bool:
        """Check --output and --resume against what is there, clear stale temporaries; True when resuming."""
        args, store = self.args, self.checkpoints
        check_output_dir(self.output_dir)
        # Nothing the run writes may land outside it: no linked folder anywhere in it, and no linked file where
        # plain opens write (the tokenizer's save_pretrained); elsewhere a file's link is replaced, not followed.
        check_no_links(self.output_dir, files=False)
        check_no_links(self.training_dir / "tokenizer")
        legacy = store.legacy()
        if args.resume and not store.exists():
            if legacy is not None:
                raise PSPInputError(
                    f"--resume: {legacy} is a checkpoint of an earlier psp-hf version, which cannot be resumed; "
                    f"remove {self.training_dir} to start afresh"
                )
            raise PSPInputError(f"--resume: no checkpoint at {store.pointer}")
        if not args.resume and (store.exists() or legacy is not None):
            found = store.pointer if store.exists() else legacy
            raise PSPInputError(
                f"--output {self.output_dir} already holds a training run ({found}); "
                "pass --resume to continue it or choose another -o/--output"
            )
        if args.resume:
            self._check_resume_args(store.run_info())
        self.accelerator.wait_for_everyone()
        if self.is_main:
            for path in store.remove_stale(self.output_dir):
                self.say(f"removed {path}, left by an earlier run that was killed")
        self.accelerator.wait_for_everyone()
        return args.resume

    def _check_resume_args(self, saved_run: dict) -> None:
        # A checkpoint written before a setting existed ran with that setting's default.
        saved = {**TrainingArguments().to_dict(), **saved_run.get("args", {})}
        current = self.args.to_dict()
        if isinstance(saved.get("dev_bitext"), str):  # one file, as runs before several dev sets recorded it
            saved["dev_bitext"] = [saved["dev_bitext"]]
        changed = [name for name in RESUME_FIXED if saved.get(name) != current.get(name)]
        if changed:
            details = "; ".join(
                f"--{name.replace('_', '-')} was {saved.get(name)!r}, now {current.get(name)!r}" for name in changed
            )
            raise PSPInputError(f"--resume: settings differ from the checkpointed run: {details}")
        if saved_run.get("world_size") != self.world_size:
            raise PSPInputError(
                f"--resume: the checkpoint was written by {saved_run.get('world_size')} process(es), "
                f"this run has {self.world_size}; resume with the same number of processes"
            )

    def _texts(self, limit: int):
        from ..model.setup import training_texts

        return training_texts(self.source, self.corpus, limit)

    def _build_model(self, resuming: bool) -> None:
        from ..model.architectures import configure_training_encoder, new_encoder
        from ..model.setup import check_table_fits, initialise, load_or_train_tokenizer
        from ..model.trainable import TrainingEncoder
        from .optimizer import make_optimizers

        args = self.args
        self.tokenizer = load_or_train_tokenizer(
            args,
            self.training_dir / "tokenizer",
            self._texts,
            self.is_main,
            self.accelerator.wait_for_everyone,
            self.say,
            resuming,
        )
        self.backend = self.tokenizer.backend_tokenizer
        self.backend.no_padding()
        self.backend.no_truncation()
        check_table_fits(len(self.tokenizer), args.dim, self.accelerator.device)
        encoder = new_encoder(
            args,
            self.tokenizer,
            self.training_dir / "tokenizer",
            hidden_size=args.dim,
            seed=args.seed,
            use_piece_weights=args.piece_weights != "none",
            initializer_range=args.init_std,
        )
        self.model = encoder.model
        if self.distilling:
            self.corpus.tokenize(encoder)
        teacher = self.corpus or self.bitext_teacher
        copied_rows = None
        if not resuming:
            copied_rows = initialise(encoder, args, getattr(teacher, "teacher", None), self._texts, self.say)
        if self.model.piece_weights is not None:
            # SIF weights are frequencies, not parameters: they stay as computed.
            self.model.piece_weights.requires_grad_(False)
        if (self.distilling or self.bitext_teacher is not None) and teacher.dim != encoder.dim:
            # encoder.dim: 2 x --dim for a concatenation
            torch.manual_seed(args.seed + 1)
            self.projection = torch.nn.Linear(encoder.dim, teacher.dim, bias=False)
        from ..losses.matryoshka import parse_nested_dims

        self.nested = parse_nested_dims(args.matryoshka_dims, args.matryoshka_weights, args.dim)
        self.sparse = self._use_sparse()
        self.model.embeddings.sparse = self.sparse
        module = TrainingEncoder(self.model, dropout=args.dropout, projection=self.projection, nested=self.nested)
        configure_training_encoder(module, args, self.training_dir, resuming, pulled_rows=copied_rows)
        self.encoder_module = self.accelerator.prepare(module)
        self.encoder_module.train()
        table, *others = self.trainable()
        self.optimizers = [
            self.accelerator.prepare(optimizer) for optimizer in make_optimizers(table, others, args.lr, self.sparse)
        ]
        self.miner = make_miner(args)

    def _use_sparse(self) -> bool:
        if self.args.sparse != "auto":
            return self.args.sparse == "on"
        # NCCL cannot all-reduce sparse tensors; gloo (CPU processes) can.
        return not (self.world_size > 1 and self.device.type == "cuda")

    def trainable(self) -> list[torch.nn.Parameter]:
        """The table first, then the other trainable parameters (piece weights if learned, the projection)."""
        table = self.model.embeddings.weight
        others = [p for p in self.model.parameters() if p is not table and p.requires_grad]
        if self.projection is not None:
            others += list(self.projection.parameters())
        return [table, *others]

    def cpu_encoder(self):
        from ...encoder import PSPEncoder
        from ...modeling import PSPModel

        model = self.model
        if next(model.parameters()).device.type != "cpu":
            copy = PSPModel(model.config)
            copy.load_state_dict({name: tensor.cpu() for name, tensor in model.state_dict().items()})
            model = copy
        return PSPEncoder(model, self.tokenizer)

    def _describe(self) -> None:
        """One line on what is trained on what (and one on the distillation corpus)."""
        args = self.args
        optimizer_text = "sparse lazy Adam" if self.sparse else "dense Adam"
        machine = f"{self.world_size} process(es) on {self.device.type}; vocab {len(self.tokenizer)}, dim {args.dim}"
        if self.source is not None and not self.distill_only:
            self.say(
                f"{self.kind} pairs from {self.source.description} (columns {self.source.first_column}, "
                f"{self.source.second_column}); negatives from {args.resolved_negatives()}; {optimizer_text}; "
                f"{machine}"
            )
        if self.bitext_teacher is not None:
            bitext = self.bitext_teacher
            toward = {"en": "of the English side", "same": "of each side", "both": "of each side and of the English"}
            mono = f"; {len(self.mono_sentences):,} monolingual sentences, weight {args.mono_weight}" * bool(
                self.mono_sentences
            )
            self.say(
                f"multilingual distillation: both sides toward teacher {bitext.teacher} (dim {bitext.dim}) "
                f"{toward[self.bitext_targets]} ({len(bitext):,} labels, {bitext.labelled_now:,} new), weight "
                f"{args.distill_weight}{mono}; margin weight {args.margin_weight}"
                + (f"; learned projection {args.dim} -> {bitext.dim}" if self.projection is not None else "")
            )
        if self.corpus is not None and not self.mono_sentences:
            role = (
                "distillation only"
                if self.distill_only
                else f"distillation weight {args.distill_weight}, margin weight {args.margin_weight}"
                if self.distilling
                else "negative filter only"
            )
            self.say(
                f"teacher {self.corpus.teacher} (dim {self.corpus.dim}) on {len(self.corpus)} corpus sentences: {role}"
                + (
                    f"; negatives with teacher cosine >= {self.teacher_threshold} skipped"
                    if self.teacher_threshold is not None
                    else ""
                )
                + (f"; learned projection {args.dim} -> {self.corpus.dim}" if self.projection is not None else "")
                + (f"; {optimizer_text}; {machine}" if self.distill_only else "")
            )
