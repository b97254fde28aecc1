"""The compiled parts of psp-hf: encode's pooling kernel and the word cache's look-up (src/psp_hf/inference/_pooling.c
and _words.c).

Everything else is configured in pyproject.toml. Both are optional: where no C compiler is found the package installs
without them and runs the same steps with torch or numpy instead (psp_hf.inference.pooling.backend() says which).
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
            extra_compile_args=COMPILE_ARGS,
            optional=True,
        )
        for name in ("_pooling", "_words", "_unigram")
    ]
)
