"""Builds the Cython core (cython_core/) into the extension module aeronio._core, and the JVM
reader's jar (aeronio/spark/java/*.java) into aeronio/spark/aeronio-spark.jar (`build_jar`:
skipped, saying so, without javac or Spark's jars; aeronio/spark/jar.py)."""

import runpy
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Command, Extension, setup
from setuptools.command.build import build


class build_jar(Command):  # noqa: N801 (a command's name, as setuptools' own)
    """Compile the JVM reader's jar into the package: into build_lib for a wheel, into the
    source tree for an editable install (as build_ext does)."""

    description = "compile aeronio/spark/java/*.java against Spark's jars into the package"
    user_options: list = []

    def initialize_options(self) -> None:
        self.build_lib = None
        self.editable_mode = False
        self._outputs: list[str] = []

    def finalize_options(self) -> None:
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def run(self) -> None:
        root = Path(__file__).parent
        jar = runpy.run_path(str(root / "aeronio" / "spark" / "jar.py"))  # not built yet
        base = root if self.editable_mode else Path(self.build_lib)
        target = base / "aeronio" / "spark" / jar["SHIPPED"].name
        try:
            if not jar["build_wanted"]():
                raise jar["JarError"](f"{jar['OPT_OUT']}=0")
            note = jar["build_shipped"](target)
            self._outputs = [str(target)]
        except jar["JarError"] as e:
            note = f"the Spark jar is not built ({e}); it is compiled on first use (javac)"
        print(f"aeronio: {note}", file=sys.stderr)

    def get_outputs(self) -> list[str]:
        return self._outputs

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class build_with_jar(build):  # noqa: N801
    sub_commands = build.sub_commands + [("build_jar", None)]


extensions = [
    Extension(
        "aeronio._core",
        ["cython_core/_core.pyx"],
        include_dirs=["cython_core"],
        extra_compile_args=["-O3", "-fwrapv"],
    )
]

setup(
    cmdclass={"build": build_with_jar, "build_jar": build_jar},
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
