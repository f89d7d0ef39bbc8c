"""Build gpukern's extension torch_ops._C.

CUDAExtension when torch is a CUDA build and nvcc is found, else a CPU-only CppExtension.
GPUKERN_CPU_ONLY=1 forces the CPU-only build (quick iteration on the host code).
With no GPU visible and TORCH_CUDA_ARCH_LIST unset, the architecture list defaults to 9.0
(H100/H200); MAX_JOBS is honoured by torch's ninja build.

Build once: object files go to a persistent folder, build/gpukern-<cuda|cpu>-<python tag>/, for
every way of building (`pip install --no-build-isolation -e .`, `pip install .`,
`python3 setup.py build_ext --inplace`). pip's editable (PEP 660) builds would otherwise compile
in a fresh temporary folder each time, so every `pip install -e .` rebuilt the whole extension;
with the persistent folder ninja recompiles only what changed (delete build/ for a clean build).
The build prints what it compiles and how long a clean build takes (pip shows it with -v).

Optional dependencies: `pip install -e .[test]` (pytest, numpy, expecttest) and
`pip install -e .[bench]` (numpy, torchvision, torchaudio, matplotlib for benchmarks/).
"""
import glob
import os
import shutil
import sys
import time

from setuptools import find_packages, setup
import torch
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCH_LIST = "9.0"


def _nvcc_found():
    if CUDA_HOME and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return True
    return shutil.which("nvcc") is not None


def _build_cuda():
    if os.environ.get("GPUKERN_CPU_ONLY", "0") == "1":
        return False
    return torch.version.cuda is not None and _nvcc_found()


def _sources(pattern):
    return sorted(glob.glob(os.path.join("csrc", "**", pattern), recursive=True))


def _cuda_arch_codes():
    """The codes nvcc will emit (sm_90, compute_90 for PTX), as torch derives them from
    TORCH_CUDA_ARCH_LIST or the visible GPUs; _C.CUDA_ARCHS reports them at run time."""
    from torch.utils.cpp_extension import _get_cuda_arch_flags
    codes = []
    for flag in _get_cuda_arch_flags():
        code = flag.rsplit("code=", 1)[-1].strip("[]")
        codes += [c for c in code.split(",") if c and c not in codes]
    return codes


class BuildExt(BuildExtension):
    """torch's BuildExtension with a persistent build folder and a progress line."""

    def finalize_options(self):
        super().finalize_options()
        variant = "cuda" if _build_cuda() else "cpu"
        tag = f"{sys.implementation.cache_tag}"
        self.build_temp = os.path.join(ROOT, "build", f"gpukern-{variant}-{tag}")

    def build_extensions(self):
        ext = self.extensions[0]
        cuda = any(src.endswith(".cu") for src in ext.sources)
        jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
        clean = not os.path.exists(os.path.join(self.build_temp, "build.ninja"))
        estimate = ("a clean CUDA build takes about 2.5 minutes on 2 cores"
                    if cuda else "a clean CPU-only build takes about 1.5 minutes on 2 cores")
        print(f"gpukern: compiling {len(ext.sources)} files ({'CUDA' if cuda else 'CPU-only'}) "
              f"with {jobs} jobs into {os.path.relpath(self.build_temp, ROOT)}/; "
              + (estimate if clean else "incremental: ninja recompiles only the files whose "
                                     "sources or compile flags changed"),
              flush=True)
        start = time.time()
        super().build_extensions()
        print(f"gpukern: extension built in {time.time() - start:.0f} s", flush=True)


def _extension():
    cxx = ["-O3", "-std=c++17"]
    include_dirs = [os.path.join(ROOT, "csrc")]
    sources = _sources("*.cpp")
    if not _build_cuda():
        print("gpukern: building the CPU-only extension")
        return CppExtension("torch_ops._C", sources, include_dirs=include_dirs,
                            extra_compile_args={"cxx": cxx})
    if not torch.cuda.is_available() and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCH_LIST
    print(f"gpukern: building the CUDA extension for TORCH_CUDA_ARCH_LIST="
          f"{os.environ.get('TORCH_CUDA_ARCH_LIST', '(the visible GPUs)')}")
    nvcc = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr",
            "-DGPUKERN_WITH_CUDA"]
    archs = "-DGPUKERN_CUDA_ARCHS=" + ",".join(_cuda_arch_codes())
    return CUDAExtension("torch_ops._C", sources + _sources("*.cu"), include_dirs=include_dirs,
                         extra_compile_args={"cxx": cxx + ["-DGPUKERN_WITH_CUDA", archs],
                                             "nvcc": nvcc})


setup(
    name="gpukern",
    version="0.1.0",
    description="Tiled convolution, matrix-vector and reduction kernels as PyTorch custom ops",
    packages=find_packages(include=["torch_ops", "torch_ops.*"]),
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.10",
    extras_require={
        "test": ["pytest", "numpy", "expecttest"],
        "bench": ["numpy", "torchvision", "torchaudio", "matplotlib"],
    },
)
