"""Checkpoints through Accelerate's state saving, made atomic by a pointer file.

`accelerator.save_state` writes the prepared module (safetensors), the optimizers and every process's RNG states;
psp writes `TrainState` (step, M, epoch, each process's position in the pair stream and the corpus stream) itself as
`train_state.json`. It is not registered with `register_for_checkpointing`, because Accelerate loads registered
objects with a full unpickler (`weights_only=False`): a crafted run folder would run code on `--resume`. Everything
else Accelerate loads with `torch.load(weights_only=True)`, which builds tensors and plain containers only. Saving
writes file by file, so a kill in the middle would leave a
half-written folder; it therefore writes into a temporary folder, which is renamed and then named in
`checkpoint.json`, replaced atomically. Whatever moment a run is killed, `checkpoint.json` names a complete
folder.

Layout under `OUTPUT_DIR/training/`:

    checkpoint.json        {"folder": "checkpoint-3", "step": 120, ...}: the checkpoint to resume from
    checkpoint-3/          the folder of `accelerator.save_state`, plus run.json (settings and process count) and
                           train_state.json (the counters)
    .checkpoint-tmp-4/     a save in progress; removed on failure and on SIGTERM, and by the next run if killed
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import PSPInputError, os_error_of
from ...io.reading import read_regular_file
from ...io.writing import atomic_path, follow_umask

CHECKPOINT_FORMAT = 2
POINTER = "checkpoint.json"
RUN_FILE = "run.json"
STATE_FILE = "train_state.json"
# What checkpoints of earlier versions hold the counters in (a pickle; read only with `weights_only=True`).
LEGACY_STATE_FILE = "custom_checkpoint_0.pkl"
TEMP_PREFIX = ".checkpoint-tmp-"
FOLDER_PREFIX = "checkpoint-"
EXPORT_PREFIX = ".export-"
# The only folder names checkpoint.json may point at: one name inside the training folder, never a path.
FOLDER_NAME = re.compile(re.escape(FOLDER_PREFIX) + r"[0-9]{1,12}")
# Counters a checkpoint must hold (later ones were added with defaults, so older checkpoints may lack them), and the
# largest value a counter may take: far beyond any run, and within the 64-bit integers torch and the stream use.
REQUIRED_COUNTERS = ("step", "epoch", "megabatch_size", "positions")
MAX_COUNTER = 2**53
# Files of the atomic writer (`.NAME.XXXX.tmp`) that a killed run may leave beside these names.
ATOMIC_TARGETS = (POINTER, "metrics.jsonl", "best.safetensors", "projection.safetensors")


@dataclass
class TrainState:
    """Progress counters saved in checkpoints (registered with Accelerate for checkpointing)."""

    step: int = 0
    epoch: int = 0
    megabatch_size: int = 1
    pairs_seen: int = 0
    train_seconds: float = 0.0
    best_score: float | None = None
    best_step: int | None = None
    last_score: float | None = None
    last_eval_step: int | None = None
    finished: bool = False
    positions: list[int] = field(default_factory=list)  # raw rows consumed in `epoch`, per process
    distill_epoch: int = 0  # pass over the distillation corpus (equals `epoch` in a distillation-only run)
    distill_position: int = 0  # rows of this pass consumed, per process (equal on every process)
    sentences_seen: int = 0  # corpus sentences in the distillation loss, all processes together
    teacher_masked: int = 0  # negatives skipped as teacher paraphrases

    def state_dict(self) -> dict[str, Any]:
        """The counters as a plain dict."""
        return dataclasses.asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the counters from `state_dict()`'s output; anything else (unknown names, wrong types) is refused."""
        problem = state_problem(state)
        if problem:
            raise ValueError(problem)
        for name, value in state.items():
            setattr(self, name, value)


def _number(value: Any, kinds: tuple[type, ...]) -> bool:
    # Finite and bounded: json.loads reads NaN and Infinity, and any size of integer.
    if not isinstance(value, kinds) or isinstance(value, bool):
        return False
    return math.isfinite(value) and abs(value) <= MAX_COUNTER


def state_problem(state: Any) -> str | None:
    """Why `state` is not a `TrainState.state_dict()` (None when it is one)."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not an object"
    fields = {item.name: item for item in dataclasses.fields(TrainState)}
    for name, value in state.items():
        if name not in fields:
            return f"unknown counter {name!r}"
        default = getattr(TrainState(), name)
        if name == "positions":
            ok = isinstance(value, list) and all(_number(item, (int,)) and item >= 0 for item in value)
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif name in ("best_score", "last_score", "train_seconds"):
            ok = (value is None and name != "train_seconds") or _number(value, (int, float))
        elif default is None:
            ok = value is None or _number(value, (int,))
        else:
            ok = _number(value, (int,)) and value >= 0
        if not ok:
            return f"counter {name!r} has the value {value!r}"
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


class CheckpointStore:
    """The checkpoints of one run in `training_dir`: find, save, load, and clean up what killed runs left."""

    def __init__(self, training_dir: Path):
        self.training_dir = Path(training_dir)
        self.pointer = self.training_dir / POINTER

    # ------------------------------------------------------------------------------------------ reading
    def exists(self) -> bool:
        """True when a run has a complete checkpoint here."""
        return self.pointer.is_file()

    def legacy(self) -> Path | None:
        """A checkpoint of the earlier single-file format (it cannot be resumed), if there is one."""
        path = self.training_dir / "checkpoint.pt"
        return path if path.is_file() else None

    def _broken(self, what: str) -> PSPInputError:
        return PSPInputError(
            f"--resume: the checkpoint in {self.training_dir} is unusable: {what}. Remove {self.training_dir} "
            "to start afresh (or train into another --output)"
        )

    def read_pointer(self) -> dict[str, Any]:
        """The contents of `checkpoint.json`, checked: it names a checkpoint folder inside the training folder, and
        that folder holds regular files only (nothing is read or written outside the run)."""
        try:
            pointer = json.loads(read_regular_file(self.pointer).decode("utf-8"))
            name = pointer["folder"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise self._broken(f"{self.pointer} cannot be read ({error})") from None
        if pointer.get("format") != CHECKPOINT_FORMAT:
            raise self._broken(f"{self.pointer} has format {pointer.get('format')!r}, not {CHECKPOINT_FORMAT}")
        if not isinstance(name, str) or not FOLDER_NAME.fullmatch(name):
            raise self._broken(f'{self.pointer} names the folder {name!r}, not a "{FOLDER_PREFIX}N" of the run')
        if not _number(pointer.get("step"), (int,)) or pointer["step"] < 0:
            raise self._broken(f"{self.pointer} has the step {pointer.get('step')!r}")
        folder = self.training_dir / name
        try:
            mode = os.lstat(folder).st_mode
        except OSError:
            raise self._broken(f"{folder} is missing") from None
        if not stat.S_ISDIR(mode):
            raise self._broken(f"{folder} is not a folder (a symlink, or a file)")
        for entry in os.scandir(folder):
            if not entry.is_file(follow_symlinks=False):
                raise self._broken(f"{entry.path} is not a regular file (a symlink, a folder or a pipe)")
        return pointer

    def folder(self) -> Path:
        """The folder of the current checkpoint."""
        return self.training_dir / self.read_pointer()["folder"]

    def run_info(self) -> dict[str, Any]:
        """Settings and process count of the run that wrote the current checkpoint."""
        path = self.folder() / RUN_FILE
        try:
            return json.loads(read_regular_file(path).decode("utf-8"))
        except (OSError, ValueError) as error:
            raise self._broken(f"{path} cannot be read ({error})") from None

    def load(self, accelerator, rank: int, state: TrainState) -> None:
        """Restore the prepared module, optimizers and RNG states of this process, and the counters into `state`.

        Nothing here unpickles in full: Accelerate reads the optimizer and RNG files with
        `torch.load(weights_only=True)`, and psp reads the counters from JSON (or, for a checkpoint of an earlier
        version, from its pickle with `weights_only=True`)."""
        pointer = self.read_pointer()
        folder = self.training_dir / pointer["folder"]
        rng = folder / f"random_states_{rank}.pkl"
        if not rng.is_file():  # load_state would go on without it, and the run would not repeat itself
            raise self._broken(f"{rng} is missing")
        counters = self._read_state(folder)
        problem = fit_problem(counters, pointer["step"], len(state.positions))
        if problem:
            raise self._broken(f"the counters in {folder} do not fit the run: {problem}")
        state.load_state_dict(counters)
        try:
            from accelerate.utils import load as safe_load

            # load_state swallows an unreadable RNG file (it logs "Could not load random states" and goes on);
            # reading it first, the same restricted way, makes a garbled or crafted one an error.
            safe_load(rng, map_location="cpu")
            accelerator.load_state(folder)
        except Exception as error:  # truncated or garbled files: torch, safetensors and pickle errors alike
            raise self._broken(f"{folder} cannot be loaded ({type(error).__name__}: {error})") from None

    def _read_state(self, folder: Path) -> dict[str, Any]:
        try:
            state = read_state_file(folder)
        except Exception as error:  # OSError, JSON errors, and the restricted unpickler's refusals
            raise self._broken(f"the counters in {folder} cannot be read ({type(error).__name__}: {error})") from None
        problem = state_problem(state)
        if problem:
            raise self._broken(f"the counters in {folder} are not a training state: {problem}")
        legacy = folder / LEGACY_STATE_FILE
        if legacy.is_file():
            # Upgrade to the JSON layout: Accelerate refuses a folder holding custom_checkpoint_N.pkl when no object
            # is registered, and registering one would have it unpickle the file in full.
            try:
                with atomic_path(folder / STATE_FILE) as temporary:  # replaces a link at the name, never follows it
                    temporary.write_text(json.dumps(state, indent=2), encoding="utf-8")
                legacy.unlink()
            except OSError as error:
                raise self._broken(f"cannot rewrite {legacy} as {STATE_FILE} ({error.strerror or error})") from None
        return state

    # ------------------------------------------------------------------------------------------ writing
    def save(
        self, accelerator, is_main: bool, run_info: dict[str, Any], state: TrainState, step: int, finished: bool
    ) -> None:
        """Save the state into a temporary folder, then make it current (every process must call this)."""
        index = self._read_index() + 1
        temporary = self.training_dir / f"{TEMP_PREFIX}{index}"
        if is_main:
            self.training_dir.mkdir(parents=True, exist_ok=True)
            _remove(temporary)
        accelerator.wait_for_everyone()
        try:
            accelerator.save_state(temporary, safe_serialization=True)
            if is_main:
                (temporary / RUN_FILE).write_text(json.dumps(run_info, indent=2), encoding="utf-8")
                (temporary / STATE_FILE).write_text(json.dumps(state.state_dict(), indent=2), encoding="utf-8")
                follow_umask(temporary.iterdir())  # the weights come 0600 from safetensors' writer
            accelerator.wait_for_everyone()
            if is_main:
                final = self.training_dir / f"{FOLDER_PREFIX}{index}"
                _remove(final)  # an orphan of a run killed between the rename and the pointer update
                os.replace(temporary, final)
                pointer = {"format": CHECKPOINT_FORMAT, "folder": final.name, "index": index, "step": step}
                pointer["finished"] = finished
                with atomic_path(self.pointer) as path:
                    path.write_text(json.dumps(pointer) + "\n", encoding="utf-8")
                self._remove_others(keep=final.name)
        except Exception as error:
            # torch's zip writer reports a full disk as a RuntimeError ("... file write failed"), safetensors' (the
            # weights) as a SafetensorError naming the errno.
            failure = os_error_of(error)
            if failure is None and not (isinstance(error, RuntimeError) and "write" in str(error).lower()):
                raise
            kept = f"the previous checkpoint {self.training_dir / self._current_name()} is kept"
            if not self.exists():
                kept = "no earlier checkpoint exists"
            reason = (failure.strerror if failure is not None else None) or str(error)
            raise PSPInputError(f"cannot write checkpoint {temporary}: {reason}; {kept}") from None
        finally:
            if is_main:
                _remove(temporary)

    def _current_name(self) -> str:
        try:
            return json.loads(read_regular_file(self.pointer))["folder"]
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    def _read_index(self) -> int:
        try:
            return int(json.loads(read_regular_file(self.pointer))["index"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def _remove_others(self, keep: str) -> None:
        for path in self.training_dir.glob(f"{FOLDER_PREFIX}*"):
            if path.is_dir() and path.name != keep:
                _remove(path)

    def remove_stale(self, output_dir: Path) -> list[Path]:
        """Remove what killed runs left: temporary and orphaned checkpoint folders, export staging, temp files."""
        found: list[Path] = []
        if self.training_dir.is_dir():
            found += sorted(self.training_dir.glob(f"{TEMP_PREFIX}*"))
            current = self._current_name() if self.exists() else None
            folders = sorted(self.training_dir.glob(f"{FOLDER_PREFIX}*"))
            found += [path for path in folders if path.is_dir() and path.name != current]
            for name in ATOMIC_TARGETS:
                found += sorted(self.training_dir.glob(f".{name}.*.tmp"))
        if output_dir.is_dir():
            found += sorted(output_dir.glob(f"{EXPORT_PREFIX}*"))
        for path in found:
            _remove(path)
        return found


def fit_problem(counters: dict[str, Any], step: int, processes: int) -> str | None:
    """Why well-formed `counters` cannot be those of the run whose checkpoint.json says `step` and which has
    `processes` processes (None when they fit): a missing counter, another step, another number of positions."""
    missing = [name for name in REQUIRED_COUNTERS if name not in counters]
    if missing:
        return f"missing {', '.join(missing)}"
    if counters["step"] != step:
        return f"step {counters['step']}, but checkpoint.json says step {step}"
    if len(counters["positions"]) != processes:
        return f"{len(counters['positions'])} stream positions for {processes} process(es)"
    if counters["megabatch_size"] < 1:
        return f"mega-batch size {counters['megabatch_size']}"
    for name in ("best_step", "last_eval_step"):
        if counters.get(name) is not None and counters[name] > step:
            return f"{name} {counters[name]} is after step {step}"
    return None


def read_state_file(folder: Path) -> Any:
    """The counters saved in checkpoint `folder`: its JSON file, or an earlier version's pickle read restrictedly.
    Neither is read through a symlink or from a pipe."""
    path = folder / STATE_FILE
    if os.path.lexists(path) or not (folder / LEGACY_STATE_FILE).is_file():
        return json.loads(read_regular_file(path).decode("utf-8"))
    import torch

    # weights_only=True: torch's restricted unpickler, which builds no objects but tensors and plain containers.
    return torch.load(folder / LEGACY_STATE_FILE, map_location="cpu", weights_only=True)


def read_checkpoint_state(training_dir: str | os.PathLike) -> dict[str, Any]:
    """The `TrainState` counters of the current checkpoint in `training_dir` (for inspection and tests)."""
    return read_state_file(CheckpointStore(Path(training_dir)).folder())
