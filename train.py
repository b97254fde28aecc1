"""Train a P-SP model: `python train.py --data PAIRS -o DIR [flags]` (same as `psp train`).

Several processes: `torchrun --nproc_per_node 2 train.py ...` (CPU) or `accelerate launch --multi_gpu ...`.
"""

import sys

from psp_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
