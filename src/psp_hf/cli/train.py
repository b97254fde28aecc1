"""`psp train` / `python train.py`: flags (and/or a config file) in, a trained Hub-format model folder out.

Launching (the same loop everywhere):

* one process: `python train.py ...` (or `psp train ...`);
* several CPU processes: `torchrun --standalone --nproc_per_node 2 train.py ...`, or
  `accelerate launch --multi_gpu --num_processes 2 train.py --cpu ...` (it starts them through torchrun; add
  `--cpu` on a machine with GPUs). `accelerate launch --cpu --num_processes 2` starts a single process;
* GPUs: `accelerate launch --multi_gpu --num_processes N train.py ...`.

Each process reads its share of the stream and mines negatives in its own mega-batches; gradients are averaged
across processes (sparse all-reduce under gloo, dense under NCCL); only the main process writes.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `psp train` (one per `TrainingArguments` field, `--no-X` beside each boolean, and --config)."""
    from ..training.arguments.training_arguments import add_arguments as add_training_arguments

    add_training_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Train; returns the exit code (1 when the model was trained but the Hub push failed)."""
    from ..training.arguments.training_arguments import arguments_from_namespace
    from ..training.loop.trainer import Trainer

    trainer = Trainer(arguments_from_namespace(args))
    trainer.train()
    return trainer.push_status
