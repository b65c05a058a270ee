"""`zrun PLAN train` for 3 optimizer steps against torch's training curves.

The golden (scripts/export_fixtures.py --train-goldens) holds, per optimizer
configuration, the loss at each of 3 steps of torch.optim.SGD / AdamW
(foreach=False) on R = 4 rows of T = 16 tokens per step, picked from the corpus
by zrun's batch selection (runtime/train/BatchSampler.h, re-implemented in batches.py). Because each
micro-batch's loss is a mean over the same number of targets, any split of the
R rows into K micro-steps of B rows on N ranks (K*N*B = R) must give the same
curve. This script:

 1. checks the oracle: the corpus is the golden's (token count, SHA-256), and
    batches.py reproduces the golden's row offsets (the sampler is
    deterministic and its known answers hold);
 2. for every curve (sgd, sgd_momentum, adamw, adamw_warmup2, adamw_clip) on one rank:
        zcc MODEL --mode train --optimizer sgd|adamw --world-size 1
            --input-shape input_ids=4x16 -o PLAN
        zrun PLAN train --data CORPUS --steps 3 --seed 0 --grad-accum 1
            --lr LR (--beta1 B1 --beta2 B2 --eps EPS | --momentum M)
            --weight-decay WD --warmup W --loss-log LOG
    (sgd's momentum is --momentum), and compares
    the log with the golden: lines `step<TAB>loss<TAB>lr`, steps 1, 2, 3, each
    loss within 1e-5 relative of torch's, each lr within 1e-6 relative;
 3. for adamw (and sgd on one split), other splits with
    --persistence-threshold 0 (every parameter sharded; once more on 4 ranks
    with --bucket-size 16KiB: many groups) and one at zcc's default
    threshold: (B, K, N) = (2, 1, 2), (1, 1, 4), (2, 2, 1), (1, 2, 2),
    compiled with input_ids=Bx16 and run with `mpirun -np N ... --grad-accum K`:
    each curve within 1e-5 relative of torch's AND of the one-rank curve.
 4. the adamw curve on one rank from the same tokens stored as a uint16
    .npy, an int64 .npy and a uint32 .bin (--data-dtype uint32);
 5. checkpoint and resume: adamw, B=2, N=2, --persistence-threshold 0 (m and
    v sharded): `--steps 1 --save DIR --save-every 1 --loss-log A`, then
    `--steps 3 --resume DIR --loss-log B`. Decided here (BatchSampler.h and TrainOptions.h
    are silent): --steps is the total number of optimizer steps, a resumed run
    continues after the checkpoint's step, and its log numbers steps globally,
    so B holds steps 2 and 3; A + B must be torch's curve (1e-5 relative).
    Step 3's loss follows step 2's update, which reads the restored m and v.
Prints one `ok` line per run; the first failure prints `FAIL ...`, exits 1.
--oracle-only does step 1 alone (no zcc/zrun). --brief does steps 1 and 2,
then of step 3 only the first split (N = 2, every parameter sharded) and
sgd's, and neither 4 nor 5. --zcc-flag passes a flag to every zcc (e.g.
`--zcc-flag=--untie=NAME`, to show what a wrong tie costs).
"""
import argparse
import hashlib
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True
import batches
from common import CheckFailure, compile_train, main_wrapper, mpirun, run_tool

LOSS_RTOL = 1e-5
LR_RTOL = 1e-6
# (curve, B, K, N, persistence threshold or None for zcc's default, bucket size)
SPLITS = [
    ("adamw", 2, 1, 2, 0, None),
    ("adamw", 1, 1, 4, 0, None),
    ("adamw", 2, 2, 1, 0, None),
    ("adamw", 1, 2, 2, 0, None),
    ("adamw", 2, 1, 2, None, None),
    ("adamw", 1, 1, 4, 0, "16KiB"),  # many groups: one adamw instruction each
    ("sgd", 1, 2, 2, 0, None),
    # The global norm sums every rank's shard (and a persistent group once).
    ("adamw_clip", 1, 2, 2, 0, None),
    ("adamw_clip", 2, 1, 2, None, None),
]


def check_oracle(golden, data):
    tokens = np.fromfile(data, dtype="<u2")
    digest = hashlib.sha256(pathlib.Path(data).read_bytes()).hexdigest()
    if len(tokens) != int(golden["train_data_tokens"]) or digest != str(golden["train_data_sha256"]):
        raise CheckFailure(f"{data}: {len(tokens)} tokens, sha256 {digest[:16]}; the golden "
                           f"was made from {int(golden['train_data_tokens'])} tokens, sha256 "
                           f"{str(golden['train_data_sha256'])[:16]}")
    batches.self_test()
    steps, rows, seq = (int(golden[k]) for k in
                        ("train_steps", "train_rows_per_step", "train_seq_len"))
    seed = int(golden["train_seed"])
    offsets = np.array([batches.step_offsets(seed, s, rows, len(tokens), seq)
                        for s in range(steps)], dtype=np.int64)
    again = np.array([batches.step_offsets(seed, s, rows, len(tokens), seq)
                      for s in range(steps)], dtype=np.int64)
    if not (np.array_equal(offsets, golden["train_offsets"]) and np.array_equal(offsets, again)):
        raise CheckFailure(f"batches.py gives offsets {offsets.tolist()}, the golden "
                           f"{golden['train_offsets'].tolist()}")
    print(f"ok oracle: corpus {len(tokens)} tokens, offsets {offsets.tolist()}")


def read_loss_log(path, label, first_step=1):
    if not path.is_file():
        raise CheckFailure(f"{label}: --loss-log {path} was not written")
    losses, lrs = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split("\t")
        try:
            step, loss, lr = int(parts[0]), float(parts[1]), float(parts[2])
            if len(parts) != 3:
                raise ValueError
        except (ValueError, IndexError):
            raise CheckFailure(f"{label}: {path}:{number}: expected `step<TAB>loss<TAB>lr`, "
                               f"got {line!r}")
        if step != first_step + number - 1:
            raise CheckFailure(f"{label}: {path}:{number}: step {step}, expected "
                               f"{first_step + number - 1} (one line per optimizer step, "
                               "numbered from 1)")
        losses.append(loss)
        lrs.append(lr)
    return np.array(losses), np.array(lrs)


def train(args, golden, curve, batch, k_steps, world, threshold, out, resume_at=None,
          bucket=None, data=None):
    """One run; with resume_at = S: `--steps S --save DIR --save-every S`, then
    `--steps <all> --resume DIR`, and the second log must hold steps S+1.. of
    the same curve."""
    optimizer = str(golden["curve_optimizer:" + curve])
    lr, beta1, beta2, eps, weight_decay, warmup, clip = golden["curve_hyper:" + curve].tolist()
    seq = int(golden["train_seq_len"])
    shown = "default" if threshold is None else str(threshold)
    label = f"{args.name} {curve} B={batch} K={k_steps} N={world} persistence={shown}"
    tag = f"{curve}-{batch}-{k_steps}-{world}-{shown}"
    extra = ["--optimizer", optimizer] + args.zcc_flag
    if data:
        label += f" data={data[0]}"
    if bucket:
        label += f" bucket={bucket}"
        tag += f"-{bucket}"
        extra += ["--bucket-size", bucket]
    plan = out / f"{tag}.zplan"
    compile_train(args.zcc, args.model, plan, world, f"input_ids={batch}x{seq}", threshold,
                  extra, label=label)
    if data:
        tag += f"-{data[0]}"
    log = out / f"{tag}.log"
    command = mpirun(world) + [
        args.zrun, str(plan), "train"] + (data[1] if data else ["--data", args.data]) + [
        "--steps", str(int(golden["train_steps"])), "--seed", str(int(golden["train_seed"])),
        "--grad-accum", str(k_steps), "--lr", repr(lr),
        "--weight-decay", repr(weight_decay), "--warmup", str(int(warmup)),
        "--loss-log", str(log)]
    if optimizer == "adamw":
        command += ["--beta1", repr(beta1), "--beta2", repr(beta2), "--eps", repr(eps)]
    else:
        command += ["--momentum", repr(beta1)]
    if clip > 0:
        command += ["--clip-grad-norm", repr(clip)]
    if resume_at is None:
        run_tool(f"{label}: zrun train", command)
        losses, lrs = read_loss_log(log, label)
    else:
        label += f" resumed after step {resume_at}"
        checkpoints = out / f"{tag}.checkpoints"
        steps_at = command.index("--steps") + 1
        first = list(command)
        first[steps_at] = str(resume_at)
        first[first.index("--loss-log") + 1] = str(out / f"{tag}.first.log")
        run_tool(f"{label}: zrun train --save", first + ["--save", str(checkpoints),
                                                        "--save-every", str(resume_at)])
        early, early_lrs = read_loss_log(out / f"{tag}.first.log", label)
        run_tool(f"{label}: zrun train --resume", command + ["--resume", str(checkpoints)])
        late, late_lrs = read_loss_log(log, label, first_step=resume_at + 1)
        losses, lrs = np.concatenate([early, late]), np.concatenate([early_lrs, late_lrs])
    reference = golden["curve:" + curve]
    if losses.shape != reference.shape:
        raise CheckFailure(f"{label}: {len(losses)} logged steps, expected {len(reference)}")
    error = np.abs(losses - reference) / np.abs(reference)
    if not (error <= LOSS_RTOL).all():
        step = int(np.argmax(error))
        raise CheckFailure(f"{label}: step {step + 1} loss {losses[step]:.9g}, torch "
                           f"{reference[step]:.9g} (relative error {error[step]:.3e} > "
                           f"{LOSS_RTOL}); curve {losses.tolist()} vs {reference.tolist()}")
    lr_reference = golden["curve_lr:" + curve]
    lr_error = np.abs(lrs - lr_reference) / lr_reference
    if not (lr_error <= LR_RTOL).all():
        raise CheckFailure(f"{label}: logged lr {lrs.tolist()}, expected "
                           f"{lr_reference.tolist()} (warmup {int(warmup)})")
    print(f"ok {label} max-rel-err {float(error.max()):.2e}")
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("--zrun", default="zrun")
    parser.add_argument("--model", required=True, help="the .onnx fixture")
    parser.add_argument("--golden", required=True, help="its .npz golden")
    parser.add_argument("--data", required=True, help="the golden's token file")
    parser.add_argument("--out", required=True, help="a scratch directory")
    parser.add_argument("--oracle-only", action="store_true",
                        help="check the corpus and the batch sampler, run nothing")
    parser.add_argument("--brief", action="store_true",
                        help="the one-rank curves and two sharded splits only")
    parser.add_argument("--zcc-flag", action="append", default=[],
                        help="an extra flag for every zcc (repeatable)")
    args = parser.parse_args()
    args.name = pathlib.Path(args.model).stem
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    golden = dict(np.load(args.golden, allow_pickle=False))
    check_oracle(golden, args.data)
    if args.oracle_only:
        return

    rows = int(golden["train_rows_per_step"])
    one_rank = {}
    curves = [k.split(":", 1)[1] for k in golden if k.startswith("curve:")]
    for curve in curves:
        one_rank[curve] = train(args, golden, curve, rows, 1, 1, None, out)
    splits = SPLITS
    if args.brief:
        splits = [SPLITS[0]] + [s for s in SPLITS if s[0] == "sgd"][:1]
    for curve, batch, k_steps, world, threshold, bucket in splits:
        if batch * k_steps * world != rows:
            raise CheckFailure(f"split B={batch} K={k_steps} N={world} does not cover "
                               f"{rows} rows")
        losses = train(args, golden, curve, batch, k_steps, world, threshold, out,
                       bucket=bucket)
        difference = float(np.max(np.abs(losses - one_rank[curve]) / np.abs(one_rank[curve])))
        if not difference <= LOSS_RTOL:
            raise CheckFailure(f"{args.name} {curve} B={batch} K={k_steps} N={world}: curve "
                               f"{losses.tolist()} differs from one rank's "
                               f"{one_rank[curve].tolist()} by {difference:.3e} relative")
    if args.brief:
        return
    # The same tokens in the other token-file formats of runtime/train/TokenData.h.
    tokens = np.fromfile(args.data, dtype="<u2")
    np.save(out / "tokens-u16.npy", tokens)
    np.save(out / "tokens-i64.npy", tokens.astype(np.int64))
    tokens.astype("<u4").tofile(out / "tokens-u32.bin")
    for kind, flags in (("npy-uint16", ["--data", str(out / "tokens-u16.npy")]),
                        ("npy-int64", ["--data", str(out / "tokens-i64.npy")]),
                        ("bin-uint32", ["--data", str(out / "tokens-u32.bin"),
                                        "--data-dtype", "uint32"])):
        train(args, golden, "adamw", rows, 1, 1, None, out, data=(kind, flags))
    # Checkpoint and resume with sharded AdamW state: the resumed run's last
    # step equals the uninterrupted curve.
    # Resuming after step 1 makes step 3's loss depend on the restored m and v.
    train(args, golden, "adamw", 2, 1, 2, 0, out, resume_at=1)


if __name__ == "__main__":
    main_wrapper(main)
