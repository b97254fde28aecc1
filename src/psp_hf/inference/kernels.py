"""The compiled kernels of encode (`_pooling.c`, `_words.c`, `_unigram.c`), each loaded where `setup.py` built it.

All are optional: an install without a C compiler has none of them and runs the same steps in numpy, torch or the
`tokenizers` library, with the same results. `PSP_C_KERNELS=0` in the environment runs as such an install would
(for comparisons: bench/encode_processes.py).
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

logger = logging.getLogger(__name__)


def load_kernel(name: str) -> ModuleType | None:
    """The compiled module `psp_hf.inference.<name>`, or None where it was not built or `PSP_C_KERNELS=0`."""
    if os.environ.get("PSP_C_KERNELS", "1") == "0":
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        logger.debug("psp's %s kernel was not built (no C compiler at install): the Python steps run instead", name)
        return None
