"""End-to-end parity: zrun on N MPI ranks against onnxruntime.

For one fixture model and each world size: compile a plan with zcc, run it
with `mpirun -np N zrun PLAN run`, run the same ONNX file with onnxruntime
(one thread) on the same input_ids, and compare the logits:
  - max |zrun - ort| <= 1e-4 * max |ort|;
  - the N-rank logits equal the 1-rank logits bit for bit (sharding moves
    weights, it must not change arithmetic).
With --check, zrun runs with its --check mode (poisoned releases, shard
checksums) and must produce the same logits.
Prints one `ok` line per run and exits non-zero at the first failure.
"""
import argparse
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def mpirun(world):
    command = ["mpirun", "-np", str(world), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--model", required=True, help="path to the .onnx fixture")
    parser.add_argument("--out", required=True)
    parser.add_argument("--worlds", default="1,2,4")
    parser.add_argument("--check", action="store_true")
    # A combined plan's infer program (zcc --mode train,infer) must match too.
    parser.add_argument("--mode", default="infer")
    parser.add_argument("--persistence-threshold", default="64")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = pathlib.Path(args.model).stem

    rng = np.random.default_rng(20261130)
    ids = rng.integers(0, 256, size=(2, 16), dtype=np.int64)
    np.save(out / "ids.npy", ids)

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, options,
                                   providers=["CPUExecutionProvider"])
    reference = session.run(["logits"], {"input_ids": ids})[0]
    scale = float(np.abs(reference).max())

    first = None
    for world in [int(w) for w in args.worlds.split(",")]:
        plan = out / f"{name}-{args.mode}-{world}.zplan"
        compiled = subprocess.run(
            [args.zcc, args.model, "--mode", args.mode,
             "--input-shape", "input_ids=2x16", "--world-size", str(world),
             "--persistence-threshold", args.persistence_threshold,
             "--bucket-size", "64KiB", "-o", str(plan)],
            capture_output=True, text=True)
        if compiled.returncode != 0:
            print(f"FAIL {name} N={world}: zcc: {compiled.stderr.strip()}")
            return 1
        logits = out / (f"{name}-{args.mode}-{world}"
                        f"{'-check' if args.check else ''}.npy")
        command = mpirun(world) + [args.zrun, str(plan), "run",
                                   "--program", "infer",
                                   "--input", f"input_ids={out / 'ids.npy'}",
                                   "--output", f"logits={logits}"]
        if args.check:
            command.append("--check")
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        ran = subprocess.run(command, capture_output=True, text=True, env=env,
                             timeout=300)
        if ran.returncode != 0:
            print(f"FAIL {name} N={world}: zrun: {ran.stderr.strip()}")
            return 1
        result = np.load(logits)
        if result.shape != reference.shape:
            print(f"FAIL {name} N={world}: logits shape {result.shape}, "
                  f"onnxruntime gives {reference.shape}")
            return 1
        error = float(np.abs(result - reference).max()) / scale
        if not error <= 1e-4:
            print(f"FAIL {name} N={world}: max error {error:.3e} of max |logit|")
            return 1
        if first is None:
            first = result
        elif not np.array_equal(result, first):
            difference = float(np.abs(result - first).max())
            print(f"FAIL {name} N={world}: differs from the first world size "
                  f"by up to {difference:.3e}")
            return 1
        mode = "" if args.mode == "infer" else f" --mode {args.mode}"
        print(f"ok {name}{mode} N={world}{' --check' if args.check else ''} "
              f"max-rel-err {error:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
