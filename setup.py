"""Build the one native extension, engine._native, from csrc/_native.pyx.

csrc/_native.pyx `include`s every subsystem .pyx in dependency order, so the
whole core is one module.  ENGINE_DEBUG=1 adds line tracing, C asserts and
Cython's annotated HTML.  ENGINE_OPT_LEVEL=0..3 sets the C optimisation level (default 3; the
wheel test builds at 0: it checks the packaging, and -O0 compiles several times faster).
"""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("ENGINE_DEBUG") == "1"

macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
OPT = os.environ.get("ENGINE_OPT_LEVEL", "3")
if OPT not in ("0", "1", "2", "3"):
    raise SystemExit(f"ENGINE_OPT_LEVEL must be 0, 1, 2 or 3, got {OPT!r}")
cflags = [f"-O{OPT}", "-fno-strict-aliasing"]
if DEBUG:
    macros += [("ENGINE_DEBUG", "1"), ("CYTHON_TRACE_NOGIL", "1")]
    cflags = ["-O0", "-g"]
else:
    macros += [("NDEBUG", "1")]

ext = Extension(
    "engine._native",
    sources=["csrc/_native.pyx", "csrc/crc32c.c"],
    include_dirs=[os.path.abspath(".")],
    define_macros=macros,
    extra_compile_args=cflags,
)

setup(
    ext_modules=cythonize(
        [ext],
        include_path=[os.path.abspath(".")],
        annotate=DEBUG,
        compiler_directives={
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": DEBUG,
            "linetrace": DEBUG,
            "embedsignature": True,
        },
    ),
)
