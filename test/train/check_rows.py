"""`zrun PLAN train --data ROWS.npy [--labels LABELS.npy]` against Hugging Face's loss.

The goldens (scripts/export_fixtures.py --row-goldens) hold 10 rows of 16 tokens
(test/models/goldens/sft-rows.npy), their labels with -100 on the prompt and the
padding (sft-labels.npy; 3 to 12 counted targets a row), and for llama-opset17
the loss of each of 5 SGD steps (lr 0.1, 4 rows a step) computed with
transformers' LlamaForCausalLM holding the fixture's ONNX weights, in float64,
each micro-batch's loss being HF's model(input_ids, labels=labels).loss on its
B rows (llama-opset17-rows.npz). 10 rows of 4 a step are 2 steps an epoch, rows
of the epoch's order beyond 8 dropped: step 3 starts the second epoch, step 5 the
third. This script:

 1. checks the oracle: the row and label files are the golden's (SHA-256), and
    batches.py (RowSampler.h re-implemented) gives the golden's row order of
    every curve;
 2. runs, each plan compiled with --optimizer sgd --persistence-threshold 0
    (every parameter sharded):
        zcc MODEL --mode train --world-size N --input-shape input_ids=Bx16
            [--input-shape labels=Bx16] -o PLAN
        mpirun -np N zrun PLAN train --data ROWS [--labels LABELS]
            [--shuffle --seed 5] --grad-accum K --steps 5 --lr 0.1 --loss-log LOG
    for the curves labels_b4 (N=1, B=4), labels_b2 (N=2, B=2; and N=1, K=2),
    shuffle_b4 (N=1), shuffle_b2 (N=2), nolabels_b4 (no --labels: labels = the
    rows; a plan without and one with a labels input), and labels_b4 from
    int32 copies of both files; every logged loss within 1e-5 relative of the
    golden's. Step 1 of labels_b4 is also held to transformers' own float32
    loss of those 4 rows (1e-5);
 3. shuffling is reproducible: a second shuffle_b4 run logs every digit of the
    first, and --seed 6 gives another curve;
 4. the reduction: on N=2 ranks of B=2 rows, step 1 logs the mean of the two
    micro-batches' losses, which differs from HF's loss of the 4 rows as one
    batch (token-weighted) because the micro-batches count 19 and 13 targets.
Prints one `ok` line per check; the first failure prints `FAIL ...`, exits 1.
--oracle-only does step 1 alone (no zcc/zrun).
"""
import argparse
import hashlib
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True
import batches
from check_training import read_loss_log
from common import CheckFailure, compile_train, main_wrapper, mpirun, run_tool

LOSS_RTOL = 1e-5
SEQ = 16
# (curve, B, K, N, labels input in the plan, --labels given, data dtype)
RUNS = [
    ("labels_b4", 4, 1, 1, True, True, "int64"),
    ("labels_b2", 2, 1, 2, True, True, "int64"),
    ("labels_b2", 2, 2, 1, True, True, "int64"),
    ("shuffle_b4", 4, 1, 1, True, True, "int64"),
    ("shuffle_b2", 2, 1, 2, True, True, "int64"),
    ("nolabels_b4", 4, 1, 1, False, False, "int64"),
    ("nolabels_b4", 4, 1, 1, True, False, "int64"),
    ("labels_b4", 4, 1, 1, True, True, "int32"),
]


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def check_oracle(golden, rows_path, labels_path):
    for path, key in ((rows_path, "rows_sha256"), (labels_path, "labels_sha256")):
        if sha256(path) != str(golden[key]):
            raise CheckFailure(f"{path}: sha256 {sha256(path)[:16]}, the golden was made "
                               f"from {str(golden[key])[:16]}")
    batches.self_test()
    rows = np.load(rows_path)
    seed, steps, global_rows = (int(golden[k]) for k in ("seed", "steps", "global_rows"))
    for name in sorted(k.split(":", 1)[1] for k in golden if k.startswith("curve:")):
        shuffle = name.startswith("shuffle")
        order = np.array([batches.step_rows(seed if shuffle else 0, shuffle, s, len(rows),
                                            global_rows) for s in range(steps)])
        if not np.array_equal(order, golden["order:" + name]):
            raise CheckFailure(f"batches.py orders {name}'s rows {order.tolist()}, the golden "
                               f"{golden['order:' + name].tolist()}")
    print(f"ok oracle: rows {list(rows.shape)}, {steps} steps of {global_rows} rows, "
          f"shuffled order {golden['order:shuffle_b4'].tolist()}")


class Runner:
    def __init__(self, args, golden, files):
        self.args, self.golden, self.files = args, golden, files
        self.out = pathlib.Path(args.out)
        self.plans = {}

    def plan(self, batch, world, labels_input):
        key = (batch, world, labels_input)
        if key not in self.plans:
            path = self.out / f"b{batch}-n{world}-{'labels' if labels_input else 'ids'}.zplan"
            extra = ["--optimizer", "sgd"]
            if labels_input:
                extra += ["--input-shape", f"labels={batch}x{SEQ}"]
            compile_train(self.args.zcc, self.args.model, path, world,
                          f"input_ids={batch}x{SEQ}", 0, extra,
                          label=f"{self.args.name} B={batch} N={world}")
            self.plans[key] = path
        return self.plans[key]

    def train(self, curve, batch, k_steps, world, labels_input, labels_given, dtype,
              seed=None, tag=""):
        shuffle = curve.startswith("shuffle")
        if seed is None:
            seed = int(self.golden["seed"]) if shuffle else 0
        label = (f"{self.args.name} {curve} B={batch} K={k_steps} N={world} "
                 f"plan-labels={'yes' if labels_input else 'no'} "
                 f"--labels={'yes' if labels_given else 'no'} {dtype}")
        if shuffle:
            label += f" --shuffle --seed {seed}"
        log = self.out / (f"{curve}-{batch}-{k_steps}-{world}-{int(labels_input)}"
                          f"{int(labels_given)}-{dtype}-{seed}{tag}.log")
        rows, labels = self.files[dtype]
        command = mpirun(world) + [
            self.args.zrun, str(self.plan(batch, world, labels_input)), "train",
            "--data", str(rows), "--grad-accum", str(k_steps),
            "--steps", str(int(self.golden["steps"])), "--lr", repr(float(self.golden["lr"])),
            "--loss-log", str(log)]
        if labels_given:
            command += ["--labels", str(labels)]
        if shuffle:
            command += ["--shuffle", "--seed", str(seed)]
        run_tool(f"{label}: zrun train", command)
        losses, _ = read_loss_log(log, label)
        return label, losses, log

    def check(self, run):
        curve = run[0]
        label, losses, _ = self.train(*run)
        reference = self.golden["curve:" + curve]
        if losses.shape != reference.shape:
            raise CheckFailure(f"{label}: {len(losses)} logged steps, expected "
                               f"{len(reference)}")
        error = np.abs(losses - reference) / np.abs(reference)
        if not (error <= LOSS_RTOL).all():
            step = int(np.argmax(error))
            raise CheckFailure(f"{label}: step {step + 1} loss {losses[step]:.9g}, the HF "
                               f"oracle {reference[step]:.9g} (relative error "
                               f"{error[step]:.3e} > {LOSS_RTOL}); curve {losses.tolist()} "
                               f"vs {reference.tolist()}")
        print(f"ok {label} max-rel-err {float(error.max()):.2e}")
        return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("--zrun", default="zrun")
    parser.add_argument("--model", required=True, help="the .onnx fixture")
    parser.add_argument("--golden", required=True, help="its -rows.npz golden")
    parser.add_argument("--rows", required=True, help="the golden's sft-rows.npy")
    parser.add_argument("--labels", required=True, help="the golden's sft-labels.npy")
    parser.add_argument("--out", required=True, help="a scratch directory")
    parser.add_argument("--oracle-only", action="store_true",
                        help="check the files and the row order, run nothing")
    args = parser.parse_args()
    args.name = pathlib.Path(args.model).stem
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    golden = dict(np.load(args.golden, allow_pickle=False))
    check_oracle(golden, args.rows, args.labels)
    if args.oracle_only:
        return
    files = {"int64": (args.rows, args.labels)}
    rows32, labels32 = out / "rows-int32.npy", out / "labels-int32.npy"
    np.save(rows32, np.load(args.rows).astype(np.int32))
    np.save(labels32, np.load(args.labels).astype(np.int32))
    files["int32"] = (rows32, labels32)
    runner = Runner(args, golden, files)
    curves = {}
    for run in RUNS:
        curves.setdefault(run[0], runner.check(run))

    hf = float(golden["hf_loss:labels_b4"])
    first = curves["labels_b4"][0]
    if not abs(first - hf) <= LOSS_RTOL * abs(hf):
        raise CheckFailure(f"step 1 of labels_b4 logs {first:.9g}; transformers' float32 "
                           f"model(input_ids, labels=labels).loss is {hf:.9g}")
    print(f"ok step 1 on 4 rows: zrun {first:.8f}, transformers float32 {hf:.8f}")

    _, again, log_again = runner.train("shuffle_b4", 4, 1, 1, True, True, "int64", tag="-again")
    _, _, log_first = runner.train("shuffle_b4", 4, 1, 1, True, True, "int64", tag="-first")
    if log_again.read_text() != log_first.read_text():
        raise CheckFailure(f"two runs with --shuffle --seed 5 logged differently: "
                           f"{log_first} vs {log_again}")
    _, other, _ = runner.train("shuffle_b4", 4, 1, 1, True, True, "int64", seed=6)
    if np.allclose(other, again, rtol=LOSS_RTOL, atol=0):
        raise CheckFailure(f"--seed 6 gives the curve of --seed 5: {other.tolist()}")
    print(f"ok --shuffle --seed 5 twice: the same log; --seed 6: another curve "
          f"{' '.join(f'{v:.4f}' for v in other)}")

    weighted = float(golden["token_weighted_step1"])
    mean_of_two = curves["labels_b2"][0]
    if abs(mean_of_two - weighted) <= 1e-4 * abs(weighted):
        raise CheckFailure(f"N=2 step 1 {mean_of_two:.9g} equals the token-weighted loss "
                           f"{weighted:.9g}; the golden's rows no longer tell the two apart")
    print(f"ok N=2 B=2 step 1 logs the mean of 2 micro-batch losses {mean_of_two:.6f}; "
          f"HF on the 4 rows as one batch {weighted:.6f}")


if __name__ == "__main__":
    main_wrapper(main)
