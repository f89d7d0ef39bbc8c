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


# --- igemm (issue 31): CUTLASS from the installed PyPI package nvidia-cutlass (pinned 4.2.0.0) ---
# The tensor-core implicit-GEMM path (csrc/conv/igemm) needs CUTLASS's headers and the sm_90a
# target (wgmma, TMA im2col). With the package installed and no TORCH_CUDA_ARCH_LIST given, the
# list defaults to 9.0a (a superset of 9.0: the other kernels compile unchanged and 9.0a code runs
# on H100/H200). GPUKERN_WITH_CUTLASS is defined only when the headers are found and 9.0a is in
# the list; otherwise the extension builds without the igemm path and says so.
IGEMM_ARCH_LIST = "9.0a"


def _cutlass_include_dirs():
    # Located, not imported: the headers are all the build needs, and importing cutlass_library
    # would pull in its Python dependencies (networkx, scipy, ...), which `pip install --no-deps
    # nvidia-cutlass==4.2.0.0` leaves out.
    import importlib.util
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    src = os.path.join(list(spec.submodule_search_locations)[0], "source")
    dirs = [os.path.join(src, "include"), os.path.join(src, "tools", "util", "include")]
    return dirs if all(os.path.isdir(d) for d in dirs) else None


def _igemm_setup():
    """(include_dirs, defines) for the igemm path; ([], []) when it is left out."""
    dirs = _cutlass_include_dirs()
    if dirs is None:
        print("gpukern: nvidia-cutlass not found (pip install nvidia-cutlass==4.2.0.0): "
              "building without the igemm tensor-core path")
        return [], []
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and (
            not torch.cuda.is_available() or all(
                torch.cuda.get_device_capability(i) == (9, 0)
                for i in range(torch.cuda.device_count()))):
        os.environ["TORCH_CUDA_ARCH_LIST"] = IGEMM_ARCH_LIST
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(",", ";").replace(" ", ";")
    if "9.0a" not in [a.replace("+PTX", "") for a in archs.split(";")]:
        print(f"gpukern: TORCH_CUDA_ARCH_LIST={archs} has no 9.0a: building without the igemm "
              "tensor-core path")
        return [], []
    print(f"gpukern: igemm tensor-core path with CUTLASS headers from {dirs[0]}")
    defs = ["-DGPUKERN_WITH_CUTLASS"]
    # The bf16 1x1 GEMM tuning experiment (csrc/conv/igemm/gemm_variants.cu, benchmarks/
    # gemm_variants.py): off by default, five more CUTLASS kernels to compile.
    if os.environ.get("GPUKERN_GEMM_VARIANTS", "0") == "1":
        defs.append("-DGPUKERN_GEMM_VARIANTS")
    return dirs, defs
# --- end igemm ---


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
        estimate = ("a clean CUDA build takes about 3.5 minutes on 2 cores (6 with the igemm path)"
                    if cuda else "a clean CPU-only build takes about 1.5 minutes on 2 cores")
        print(f"gpukern: compiling {len(ext.sources)} files ({'CUDA' if cuda else 'CPU-only'}) "
              f"with {jobs} jobs into {os.path.relpath(self.build_temp, ROOT)}/; "
              + (estimate if clean else "incremental: ninja recompiles only the files whose "
                                     "sources or compile flags changed"),
              flush=True)
        start = time.time()
        super().build_extensions()
        print(f"gpukern: extension built in {time.time() - start:.0f} s", flush=True)

    def copy_extensions_to_source(self):
        """The in-place copy (setuptools builds into build/ and copies), then the removal of any
        torch_ops/_C.*.so with another suffix: one from an older build (e.g.
        _C.cpython-311-x86_64-linux-gnu.so from before the stable-ABI build) would be imported
        first by that Python."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            fullname = self.get_ext_fullname(ext.name)
            package = ".".join(fullname.split(".")[:-1])
            package_dir = build_py.get_package_dir(package)
            built = os.path.abspath(os.path.join(package_dir,
                                                 os.path.basename(self.get_ext_filename(fullname))))
            stem = fullname.split(".")[-1]
            for path in glob.glob(os.path.join(os.path.dirname(built), f"{stem}.*.so")):
                if os.path.abspath(path) == built:
                    continue
                os.remove(path)
                print(f"gpukern: removed the stale build {os.path.relpath(path, ROOT)}",
                      flush=True)


# The extension uses only Python's stable ABI (csrc/bindings.cpp's PyInit__C; the ops are reached
# through torch.ops, no pybind11, no libtorch_python): one _C.abi3.so serves every CPython >= 3.10.
LIMITED_API = "-DPy_LIMITED_API=0x030A0000"


def _extension():
    cxx = ["-O3", "-std=c++17", LIMITED_API]
    include_dirs = [os.path.join(ROOT, "csrc")]
    sources = _sources("*.cpp")
    if not _build_cuda():
        print("gpukern: building the CPU-only extension")
        return CppExtension("torch_ops._C", sources, include_dirs=include_dirs,
                            extra_compile_args={"cxx": cxx}, py_limited_api=True)
    igemm_dirs, igemm_defs = _igemm_setup()  # igemm (issue 31): may set the arch list to 9.0a
    include_dirs += igemm_dirs
    if not torch.cuda.is_available() and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCH_LIST
    print(f"gpukern: building the CUDA extension for TORCH_CUDA_ARCH_LIST="
          f"{os.environ.get('TORCH_CUDA_ARCH_LIST', '(the visible GPUs)')}")
    nvcc = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr",
            "-DGPUKERN_WITH_CUDA"] + igemm_defs
    archs = "-DGPUKERN_CUDA_ARCHS=" + ",".join(_cuda_arch_codes())
    # cuBLASLt: the 1x1 convolutions' GEMMs (csrc/conv/igemm/blas.cpp); torch's CUDA build ships
    # and loads the same library.
    cu = _sources("*.cu")
    # The implicit-GEMM tile / cluster tuning experiment (csrc/conv/igemm/igemm_variants.cu,
    # benchmarks/igemm_variants.py): linked only with GPUKERN_IGEMM_VARIANTS=1 (eight more CUTLASS
    # kernels to compile; the dispatch finds them through a weak symbol, so the other files'
    # flags, and their objects, stay the same either way).
    if os.environ.get("GPUKERN_IGEMM_VARIANTS", "0") != "1" or not igemm_defs:
        cu = [f for f in cu if os.path.basename(f) != "igemm_variants.cu"]
    return CUDAExtension("torch_ops._C", sources + cu, include_dirs=include_dirs,
                         libraries=["cublasLt"], py_limited_api=True,
                         extra_compile_args={
                             "cxx": cxx + ["-DGPUKERN_WITH_CUDA", archs] + igemm_defs,
                             "nvcc": nvcc})


setup(
    name="gpukern",
    version="0.1.0",
    description="Tiled convolution, matrix-vector and reduction kernels as PyTorch custom ops",
    packages=find_packages(include=["torch_ops", "torch_ops.*"]),
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    python_requires=">=3.10",
    extras_require={
        "test": ["pytest", "numpy", "expecttest"],
        "bench": ["numpy", "torchvision", "torchaudio", "matplotlib"],
    },
)
