"""The training loop (`trainer.py`): its set-up and resume checks, mining, the optimizers, checkpoints, the
checks for non-finite values, stopping on SIGTERM and the end of a run."""
