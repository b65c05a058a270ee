# lit configuration for zplan: .mlir files run zcc-opt, .onnxtxt files run
# zcc on protobuf-text ONNX models, .test files run zcc on the binary
# fixtures in test/models.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "zplan"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "models"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zplan_obj_root, "test")

# Captured names must not leak between CHECK-LABEL sections.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
config.substitutions.append(("%models", os.path.join(config.zplan_src_root, "test", "models")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%zplan_src", config.zplan_src_root))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
# `not` and `split-file` are called by name at the start of RUN lines, where
# the default substitutions do not reach; find them on PATH, as MLIR does.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# mpirun with a private TMPDIR per launch (see test/bin/mpirun), ahead of the
# real one on PATH.
llvm_config.with_environment(
    "PATH", os.path.join(config.zplan_src_root, "test", "bin"), append_path=True)
llvm_config.use_default_substitutions()
tool_dirs = [config.zplan_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["zcc", "zcc-opt", "zrun"], tool_dirs)

# Whether this machine has an NVIDIA GPU (nvidia-smi lists one): tests of
# how zrun refuses --backend cuda without a device require its absence.
import shutil
import subprocess

def _has_cuda_device():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True,
                                timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout

config.available_features.add(
    "cuda-device" if _has_cuda_device() else "no-cuda-device")


# zplan's own f32 GEMM runs where the CPU has AVX-512 F (runtime/cpu/Gemm.h);
# a test of what only it does (packed weights) REQUIRES: avx512.
def _has_avx512():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return any(line.startswith("flags") and " avx512f" in line
                       for line in cpuinfo)
    except OSError:
        return False

if _has_avx512():
    config.available_features.add("avx512")


# The OpenBLAS kernels zrun runs here: where OpenBLAS did not know the CPU by
# model number, zrun re-executes itself with OPENBLAS_CORETYPE set
# (runtime/cpu/BlasCore.h), which the Python module cannot do. Every test
# process gets zrun's choice, so that the module computes what zrun computes
# (test/python compares them bit for bit); test/zrun/blas-core.test unsets it
# to check zrun's own choice.
def _zrun_blas_core():
    zrun = os.path.join(config.zplan_tools_dir, "zrun")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    try:
        text = subprocess.run([zrun, "--help"], capture_output=True, text=True,
                              env=env, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in text.splitlines():
        if line.startswith("BLAS: OpenBLAS's "):
            return line.split()[2]
    return None

_core = _zrun_blas_core()
if _core:
    config.environment["OPENBLAS_CORETYPE"] = _core
