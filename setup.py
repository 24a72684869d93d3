"""Builds the Cython core (cython_core/) into the extension module aeronio._core."""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "aeronio._core",
        ["cython_core/_core.pyx"],
        include_dirs=["cython_core"],
        extra_compile_args=["-O3", "-fwrapv"],
    )
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
