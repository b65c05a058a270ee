"""Cache exports through `zcc --mode infer` + `zrun run` against onnxruntime.

For one cache export (test/models/*-kv-opset17.onnx: input_ids,
attention_mask, position_ids, past_key_values.{i}.key|value in; logits,
present.{i}.key|value out) and each (past, seq) of --shapes: bind the static
shapes with --input-shape (input_ids, attention_mask, position_ids and ONE
past input: the dimension symbols 'batch' and 'past_sequence' bind the other
past inputs), compile a plan for every world size of --worlds, run it with
`mpirun -np N zrun PLAN run` on the same feed as onnxruntime (random ids,
attention_mask all ones, position_ids past..past+seq-1, the past normal
random values; with --padded the last row's first two past slots masked
out) and compare every output:
  - max |zrun - ort| <= 1e-4 * max |ort| per output;
  - the N-rank outputs equal the 1-rank outputs bit for bit.
Prints one `ok` line per (shape, world size); exits 1 at the first failure.
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


def feed_for(session, batch, seq, past, rng, padded):
    feed = {}
    for info in session.get_inputs():
        if info.name == "input_ids":
            feed[info.name] = rng.integers(0, 256, size=(batch, seq), dtype=np.int64)
        elif info.name == "attention_mask":
            feed[info.name] = np.ones((batch, past + seq), dtype=np.int64)
            if padded:
                # The last row's first two past slots are padding (a left-
                # padded prompt): their keys must get no weight.
                feed[info.name][-1, :min(2, past)] = 0
        elif info.name == "position_ids":
            feed[info.name] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
        elif info.name.startswith("past_key_values."):
            heads, head_dim = info.shape[1], info.shape[3]
            feed[info.name] = rng.normal(size=(batch, heads, past, head_dim)).astype(np.float32)
        else:
            raise SystemExit(f"unexpected input {info.name}")
    return feed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zcc", required=True)
    parser.add_argument("--zrun", required=True)
    parser.add_argument("--model", required=True, help="path to a *-kv-opset17.onnx fixture")
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--shapes", default="7x1,5x3", help="PASTxSEQ,... to check")
    parser.add_argument("--worlds", default="1,2")
    parser.add_argument("--padded", action="store_true",
                        help="zeros in the last row's attention_mask (its first two past slots)")
    parser.add_argument("--persistence-threshold", type=int,
                        help="passed to zcc (0: every parameter sharded)")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = pathlib.Path(args.model).stem
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    rng = np.random.default_rng(20261201)
    threshold = ([] if args.persistence_threshold is None
                 else ["--persistence-threshold", str(args.persistence_threshold)])
    suffix = "" if args.persistence_threshold is None else f" threshold={args.persistence_threshold}"
    suffix += " padded" if args.padded else ""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    for shape in args.shapes.split(","):
        past, seq = (int(v) for v in shape.split("x"))
        feed = feed_for(session, args.batch, seq, past, rng, args.padded)
        reference = dict(zip(outputs, session.run(outputs, feed)))
        tag = f"{name}-p{past}s{seq}"
        for key, value in feed.items():
            np.save(out / f"{tag}-{key}.npy", value)
        bindings = []
        for key in ("input_ids", "attention_mask", "position_ids", "past_key_values.0.key"):
            bindings += ["--input-shape", f"{key}=" + "x".join(str(d) for d in feed[key].shape)]
        first = None
        for world in [int(w) for w in args.worlds.split(",")]:
            plan = out / f"{tag}-{world}.zplan"
            compiled = subprocess.run(
                [args.zcc, args.model, *bindings, "--world-size", str(world), *threshold,
                 "-o", str(plan)], capture_output=True, text=True)
            if compiled.returncode != 0:
                print(f"FAIL {name} past={past} seq={seq} N={world}: zcc: "
                      f"{compiled.stderr.strip()}")
                return 1
            command = mpirun(world) + [args.zrun, str(plan), "run"]
            for key in feed:
                command += ["--input", f"{key}={out / f'{tag}-{key}.npy'}"]
            for key in outputs:
                command += ["--output", f"{key}={out / f'{tag}-{world}-out-{key}.npy'}"]
            ran = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
            if ran.returncode != 0:
                print(f"FAIL {name} past={past} seq={seq} N={world}: zrun: {ran.stderr.strip()}")
                return 1
            results = {key: np.load(out / f"{tag}-{world}-out-{key}.npy") for key in outputs}
            worst = 0.0
            for key in outputs:
                got, want = results[key], reference[key]
                if got.shape != want.shape:
                    print(f"FAIL {name} past={past} seq={seq} N={world}: {key} shape "
                          f"{got.shape}, onnxruntime gives {want.shape}")
                    return 1
                error = float(np.abs(got - want).max()) / float(np.abs(want).max())
                if not error <= 1e-4:
                    print(f"FAIL {name} past={past} seq={seq} N={world}: {key} max error "
                          f"{error:.3e} of its max |value|")
                    return 1
                worst = max(worst, error)
            if first is None:
                first = results
            else:
                for key in outputs:
                    if not np.array_equal(results[key], first[key]):
                        difference = float(np.abs(results[key] - first[key]).max())
                        print(f"FAIL {name} past={past} seq={seq} N={world}: {key} differs "
                              f"from the first world size by up to {difference:.3e}")
                        return 1
            print(f"ok {name} past={past} seq={seq} N={world}{suffix} outputs={len(outputs)} "
                  f"max-rel-err {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
