"""The compiled parts of psp-hf: encode's pooling kernel, the word cache's look-up and its Unigram search of new words
(src/psp_hf/inference/_pooling.c, _words.c and _unigram.c, with the helpers of _buffers.h).

Everything else is configured in pyproject.toml. All are optional: where no C compiler is found the package installs
without them and runs the same steps with torch, numpy or the tokenizers library instead
(psp_hf.inference.pooling.backend() says how it pools).
"""

import sys

from setuptools import Extension, setup

# No fused multiply-add: the kernel must round as numpy's and torch's pooling do (see the C file's header).
# GCC or clang (the kernel uses their vector extension); with another compiler the build fails and is skipped.
COMPILE_ARGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            f"psp_hf.inference.{name}",
            [f"src/psp_hf/inference/{name}.c"],
            depends=["src/psp_hf/inference/_buffers.h"],
            extra_compile_args=COMPILE_ARGS,
            optional=True,
        )
        for name in ("_pooling", "_words", "_unigram")
    ]
)
