"""Builds the memrec package with CMake, against the torch of the Python that runs pip.

The package is memrec's install prefix: <package>/bin/memrec (the command; `memrec` on PATH execs it),
<package>/lib/memrec (the preload libraries), and the Python module itself, where `memrec record` finds them
(cli/cmd_record.cpp). CMake's build stays in build-pip/, one folder per interpreter and torch, so a second
`pip install .` only rebuilds what changed. The binaries are installed stripped: debug info is most of their size
(docs/python.md gives the wheel's size). Extra CMake arguments: MEMREC_CMAKE_ARGS.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["memrec", "memrec-run", "memrec_preload", "memrec_autorecord", "memrec_python"]


def import_torch():
    try:
        import torch
    except ImportError:
        sys.exit(f"memrec builds against the torch of the Python that runs pip, and {sys.executable} cannot import "
                 "torch: install torch first, then `pip install --no-build-isolation .` (isolation hides it)")
    return torch


def version():
    with open(os.path.join(HERE, "CMakeLists.txt")) as f:
        return re.search(r"project\(memrec VERSION ([0-9.]+)", f.read()).group(1)


def cmake_arguments(torch):
    args = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DMEMREC_PYTHON={sys.executable}", "-DMEMREC_WITH_PYTHON=ON",
            "-DMEMREC_BUILD_TESTS=OFF", "-DMEMREC_BUILD_BENCH=OFF", "-DMEMREC_INSTALL=OFF",
            "-DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON",  # the installed binaries find this torch's libraries
            f"-DMEMREC_WITH_CUDA={'ON' if torch.version.cuda else 'OFF'}",
            f"-DMEMREC_WITH_VIEWER={'ON' if viewer_libraries() else 'OFF'}"]
    if os.path.isdir(torch.utils.cmake_prefix_path):
        args.append(f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}")
    if shutil.which("ninja"):
        args.append("-GNinja")
    return args + shlex.split(os.environ.get("MEMREC_CMAKE_ARGS", ""))


def viewer_libraries():
    check = ["pkg-config", "--exists", "imgui", "glfw3", "gl"]
    return shutil.which("pkg-config") and subprocess.run(check).returncode == 0


def torch_requirement(torch):
    """The torch this build's libtorch ABI is: its major.minor, as CMake checks (python/CMakeLists.txt)."""
    return "torch==" + ".".join(torch.__version__.split(".")[:2]) + ".*"


class CMakeBuild(build_ext):
    """Builds memrec's targets, installs them into a staging prefix, and lays that out as the package."""

    def run(self):
        build = os.path.join(HERE, "build-pip", f"{sys.implementation.cache_tag}-torch{TORCH.__version__}")
        stage = os.path.join(build, "stage")
        subprocess.check_call(["cmake", "-S", HERE, "-B", build, *cmake_arguments(TORCH)])
        subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count()), "--target", *TARGETS])
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", build, "--prefix", stage, "--strip"])
        package = os.path.dirname(self.get_ext_fullpath("memrec._C"))
        for folder in ("bin", "lib/memrec"):
            shutil.copytree(os.path.join(stage, folder), os.path.join(package, folder), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("python"))
        module = os.path.join(stage, "lib/memrec/python/memrec", os.path.basename(self.get_ext_fullpath("memrec._C")))
        shutil.copy2(module, self.get_ext_fullpath("memrec._C"))


TORCH = import_torch()
os.makedirs(os.path.join(HERE, "build-pip"), exist_ok=True)  # setuptools' own build and egg-info stay out of build/
setup(
    version=version(),
    install_requires=[torch_requirement(TORCH)],
    package_dir={"": "python"},
    packages=["memrec", "memrec._boot"],
    ext_modules=[Extension("memrec._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
