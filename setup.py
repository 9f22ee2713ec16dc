"""Builds the extension `fraglab._fraglab` and the `fraglab` executable with CMake (pyproject.toml has the
metadata). FRAGLAB_BUILD_DIR names a CMake build directory to reuse (default build-python/, configured on
first use for the module and the command line only); FRAGLAB_BUILD_JOBS the parallel jobs."""

import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(ROOT, "build-python"), exist_ok=True)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("FRAGLAB_BUILD_DIR") or os.path.join(ROOT, "build-python"))
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DFRAGLAB_PYTHON=ON"]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            configure += [f"-DPython_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release",
                          "-DFRAGLAB_TESTS=OFF", "-DFRAGLAB_BENCH=OFF", "-DFRAGLAB_GUI=OFF", "-DFRAGLAB_CUDA=OFF"]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
        subprocess.check_call(configure)
        jobs = os.environ.get("FRAGLAB_BUILD_JOBS") or str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_fraglab", "fraglab", "-j", jobs])
        with open(os.path.join(build_dir, "python", "artifacts.txt")) as f:
            module, executable = f.read().split()
        # A reused build directory keeps the interpreter it was configured for: its module must fit this one.
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if not module.endswith(suffix):
            raise RuntimeError(f"{build_dir} builds the module for another Python ({os.path.basename(module)}, "
                               f"this one needs *{suffix}): give another FRAGLAB_BUILD_DIR")
        destination = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copy2(module, destination)
        bin_dir = os.path.join(os.path.dirname(destination), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        shutil.copy2(executable, os.path.join(bin_dir, "fraglab"))


setup(
    ext_modules=[CMakeExtension("fraglab._fraglab")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build files stay out of the CMake build directory build/.
    options={"build": {"build_base": os.path.join("build-python", "setuptools")},
             "egg_info": {"egg_base": os.path.join("build-python")}},
)
