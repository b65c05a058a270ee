#!/usr/bin/env python3
"""Checks that zrun runs OpenBLAS kernels of this CPU's instruction set.

    check_blas_core.py --zrun ZRUN

Reads the line `BLAS: OpenBLAS's <core> kernels` of `zrun --help` and the
CPU's features from /proc/cpuinfo. With AVX-512 (F, CD, BW, DQ, VL) the core
must be one with AVX-512 kernels, with AVX2 and FMA one with AVX2 kernels;
other CPUs are not checked. Then OPENBLAS_CORETYPE=Prescott must be kept as
the user's choice. Prints one `ok` line per check; exits 1 on a failure.
"""
import argparse
import os
import re
import subprocess
import sys

AVX512_CORES = {"skylakex", "cooperlake", "sapphirerapids"}
AVX2_CORES = AVX512_CORES | {"haswell", "zen"}


def core_of(zrun, env):
    output = subprocess.run([zrun, "--help"], env=env, check=True, capture_output=True,
                            text=True).stdout
    match = re.search(r"^BLAS: OpenBLAS's (\S+) kernels", output, re.M)
    if not match:
        sys.exit("FAIL: `zrun --help` names no OpenBLAS core")
    return match.group(1)


def cpu_flags():
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zrun", required=True)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    core = core_of(args.zrun, env)
    flags = cpu_flags()
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        wanted, what = AVX512_CORES, "AVX-512"
    elif {"avx2", "fma"} <= flags:
        wanted, what = AVX2_CORES, "AVX2"
    else:
        wanted, what = None, "neither AVX-512 nor AVX2"
    if wanted is not None and core.lower() not in wanted:
        sys.exit(f"FAIL: the CPU has {what}, zrun runs OpenBLAS's {core} kernels")
    print(f"ok CPU with {what}: zrun runs OpenBLAS's {core} kernels")
    chosen = core_of(args.zrun, dict(env, OPENBLAS_CORETYPE="Prescott"))
    if chosen.lower() != "prescott":
        sys.exit(f"FAIL: OPENBLAS_CORETYPE=Prescott, zrun runs OpenBLAS's {chosen} kernels")
    print("ok OPENBLAS_CORETYPE=Prescott is kept")


if __name__ == "__main__":
    main()
