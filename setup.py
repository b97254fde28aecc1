"""The one compiled part of psp-hf: the pooling kernel (src/psp_hf/inference/_pooling.c).

Everything else is configured in pyproject.toml. The extension is optional: where no C compiler is found the
package installs without it and pools with torch or numpy instead (psp_hf.inference.pooling.backend() says which).
"""

import sys

from setuptools import Extension, setup

# No fused multiply-add: the kernel must round as numpy's and torch's pooling do (see the C file's header).
COMPILE_ARGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "psp_hf.inference._pooling",
            sources=["src/psp_hf/inference/_pooling.c"],
            extra_compile_args=COMPILE_ARGS,
            optional=True,
        )
    ]
)
