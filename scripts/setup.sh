#!/usr/bin/env bash
# Installs everything zplan needs to build and test, by package name: Debian
# packages through apt-get, Python packages through pip. Safe to run twice,
# and quick when everything is already there (nothing is downloaded then).
#
# Not installed here: torch and transformers. Only scripts/export_fixtures.py
# needs them, to regenerate the committed fixtures in test/models.
set -euo pipefail

debian_packages=(
  cmake ninja-build g++ git python3 python3-pip
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libprotobuf-dev protobuf-compiler libonnx-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  libgtest-dev libbenchmark-dev
  # python/: the zplan module (pybind11's headers and CMake config).
  python3-pybind11
  # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes.
  clang-19 libclang-rt-19-dev
  # scripts/check_format.sh (ctest `format`): the project's formatter.
  clang-format-19
)
# module:package pairs (the test suite reads plans from Python through
# protobuf's generated classes).
python_modules=(onnx:onnx onnxruntime:onnxruntime numpy:numpy google.protobuf:protobuf)

missing=()
for package in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

python=${PYTHON:-python3}
missing_py=()
for pair in "${python_modules[@]}"; do
  "$python" -c "import ${pair%%:*}" 2>/dev/null || missing_py+=("${pair##*:}")
done
if [ ${#missing_py[@]} -gt 0 ]; then
  echo "setup: installing Python packages: ${missing_py[*]}"
  # Debian's own python refuses system-wide pip installs (PEP 668); other
  # pythons (pyenv, venv) take the plain form.
  "$python" -m pip install -q "${missing_py[@]}" 2>/dev/null \
    || "$python" -m pip install -q --break-system-packages "${missing_py[@]}"
else
  echo "setup: Python packages present"
fi

# nvcc is part of the CUDA toolkit under /usr/local/cuda, not a package here;
# without it the build skips the CUDA parts (see README).
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found at /usr/local/cuda"
else
  echo "setup: no CUDA toolkit at /usr/local/cuda; CUDA parts will not be built"
fi
