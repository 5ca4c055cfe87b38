"""Build of iognn._C: setuptools hands the extension to CMake (see docs/build.md for why).

Environment variables:
  IOGNN_BUILD_DIR        CMake build folder (default build/python); reused between builds
  IOGNN_WITH_CUDA        AUTO (default), ON or OFF
  TORCH_CUDA_ARCH_LIST   CUDA architectures, e.g. "9.0" or "9.0a;8.0" (default "9.0"; never detected)
  MAX_JOBS               parallel compile jobs (default: number of CPUs)
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def cuda_architectures() -> str:
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0").replace(",", ";").replace(" ", ";")
    out = []
    for arch in filter(None, archs.split(";")):
        arch = arch.replace("+PTX", "")
        out.append(arch.replace(".", ""))
    return ";".join(out)


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(os.environ.get("IOGNN_BUILD_DIR", ROOT / "build" / "python")).resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DIOGNN_BUILD_PYTHON=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DIOGNN_PYTHON_OUTPUT_DIR={out_dir}",
            f"-DIOGNN_WITH_CUDA={os.environ.get('IOGNN_WITH_CUDA', 'AUTO')}",
            f"-DCMAKE_CUDA_ARCHITECTURES={cuda_architectures()}",
        ]
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 1))
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_C", "-j", jobs], check=True)


setup(
    ext_modules=[CMakeExtension("iognn._C")],
    cmdclass={"build_ext": CMakeBuild},
)
