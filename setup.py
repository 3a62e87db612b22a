"""Build shoal's C extensions (Atari frame preprocessing; atomic counters for the multiprocessing backend's
signalling; the guard that lets one thread at a time into a vector env; buffer addresses for copies out of the
shared buffers; an env's step results written into the buffers; an env's info merged into Gymnasium's vector
form, and the info table's two ends); everything else is in pyproject.toml."""

import sys

import numpy
from setuptools import Extension, setup

# No FMA contraction: the kernel must round exactly as OpenCV's area resize does.
flags = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]
# An extension of several files: what they share stays inside it (only its PyInit_ is exported).
private = [] if sys.platform == "win32" else ["-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension("shoal.atari._frames", ["src/shoal/atari/_frames.c"], extra_compile_args=flags),
        Extension("shoal.vector._counters", ["src/shoal/vector/_counters.c"], extra_compile_args=flags[:1]),
        Extension("shoal.vector._guard", ["src/shoal/vector/_guard.c"], extra_compile_args=flags[:1]),
        Extension("shoal.vector._memory", ["src/shoal/vector/_memory.c"], extra_compile_args=flags[:1]),
        Extension("shoal.vector._pipe", ["src/shoal/vector/_pipe.c"], extra_compile_args=flags[:1]),
        # built against numpy 2's headers, which by default build for every numpy from 1.x on (numpy>=1.24 at run time)
        Extension(
            "shoal.vector._infos",
            ["src/shoal/vector/_infos.c", "src/shoal/vector/info_table.c"],
            depends=["src/shoal/vector/infos.h"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=flags[:1] + private,
        ),
        Extension(
            "shoal.vector._rows",
            [f"src/shoal/vector/{name}.c" for name in ("_rows", "rows_agents", "rows_values", "rows_lists")],
            depends=["src/shoal/vector/rows.h"],
            include_dirs=[numpy.get_include()],
            extra_compile_args=flags[:1] + private,
        ),
    ]
)
