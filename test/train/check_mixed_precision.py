"""zcc --param-dtype bf16 [--reduce-dtype bf16] [--compute-dtype fp32|bf16]
against torch's mixed precision.

The golden (scripts/mp_goldens.py: goldens/llama-opset17-bf16.npz) is "bf16
parameters over an fp32 master" written out in torch: the float32 master
weights rounded to bf16 (round to nearest even) for every op that reads a
parameter, float32 compute and gradients, AdamW on the float32 master; with
--reduce-dtype bf16 each micro-step's per-rank gradient rounded to bf16 and
summed over the ranks in bf16; with --compute-dtype bf16 (its bf16c keys)
every Linear layer's input and output gradient rounded to bf16 too, the
products accumulated in float32. Steps a-d are compute fp32: their zcc runs
name --compute-dtype fp32 (zcc's default is the param dtype). Every zcc here
runs with --persistence-threshold 0, so every parameter is sharded and every
parameter is rounded (at zcc's default threshold the small ones stay
float32). Steps:

 a. the oracle: the golden's keys are there, its parameters are the model's
    trainable initializers, the corpus is the golden's (token count,
    SHA-256) and batches.py gives its row offsets;
 b. gradients, N = 1, 2, 4:
        zcc MODEL --mode train --world-size N --input-shape input_ids=2x8
            --persistence-threshold 0 --param-dtype bf16 -o PLAN
        mpirun -np N zrun PLAN gradients --input input_ids=IDS.npy --output-dir DIR
    DIR/loss.npy within 1e-5 relative of bf16:loss; every parameter listed
    once in DIR/gradients.txt with the initializer's shape; at the golden's
    sampled entries (32 seeded ones and the largest |g| per tensor)
    |ours - torch| <= 1e-4 * max |torch| of the tensor + 1e-6 * the largest
    max |torch| (check_gradients.py's bound); and the same entries must NOT
    all be within that bound of the unrounded model's gradients (fp32:gradval,
    which the golden keeps 41x the bound away): a run that does not round
    fails. Whether N = 1, 2, 4 give bitwise the same loss and gradients is
    printed (identical-across-N=yes/no), not required;
 b2. the same with --reduce-dtype bf16: every rank has the same input, so
    rounds the same gradient g to b = bf16(g) and the bf16 sum over N ranks
    times 1/N is exactly b (N = 4: when MPI adds pairs first; one by one, 3b
    rounds, so within 2^-7 of b is accepted there). Every entry must equal
    the bf16 rounding of step b's gradient of the same N, bit for bit;
 c. loss curves of 10 AdamW steps (lr 1e-2, betas 0.9/0.999, eps 1e-8,
    weight decay 0.1) on R = 4 rows of T = 16 tokens per step:
        zcc ... --input-shape input_ids=Bx16 --persistence-threshold 0
            --param-dtype bf16 [--reduce-dtype bf16] -o PLAN
        mpirun -np N zrun PLAN train --data CORPUS --steps 10 --seed 0
            --grad-accum K --lr 0.01 --beta1 0.9 --beta2 0.999 --eps 1e-08
            --weight-decay 0.1 --warmup 0 --loss-log LOG
    reduce fp32 for (B, K, N) = (4,1,1), (2,1,2), (1,1,4), (2,2,1), (1,2,2)
    against curve:bf16; reduce bf16 for (2,1,2), (1,2,2) against
    curve:bf16_reduce_bf16_n2 and _n2_k2 (one bf16 addition per element: no
    order to choose), and (1,1,4) against the golden's 15 curves
    n4_curve:<order>, one per order in which 4 ranks' bf16 gradients can be
    added (MPI's reduce-scatter of a commutative operation picks one; the
    orders' curves differ by up to 5e-4, more than the rounding of the
    weights itself moves the curve): the closest must be within the
    tolerance, and the line names it and the error against the golden's
    reference order ((0+1)+(2+3)), curve:bf16_reduce_bf16_n4. Each line also
    prints the largest relative difference to curve:fp32 (no rounding at
    all); a curve closer to curve:fp32 than to its bf16 golden fails;
 d. the bytes of one micro-step (zrun train --steps 1 --stats, rank 0's
    `zrun: per micro-step: gathered X B, reduced Y B`) of (2,1,2) plans
    compiled fp32, bf16 and bf16 + --reduce-dtype bf16: gathered(bf16) * 2 ==
    gathered(fp32), reduced(bf16) == reduced(fp32), reduced(bf16 reduce
    bf16) * 2 == reduced(fp32), exactly;
 e. compute bf16, gradients, N = 1, 2, 4: step b's runs with
    --param-dtype bf16 alone (so zcc's default --compute-dtype is tested),
    against bf16c:loss (within BF16C_LOSS_RTOL) and bf16c:grad (each
    tensor's ||g - torch|| / ||torch|| within BF16C_GRAD_L2); the gradient of
    every Linear weight (bf16c:linear_names) must be bf16 values, as one
    rounded product dW is (every rank computes the same micro-batch, and a
    sum of N equal bf16 values over N stays one); the loss must be further
    than BF16C_LOSS_RTOL from the compute-fp32 bf16:loss. Bitwise equality
    across N is printed as in step b;
 f. compute bf16, curves: step c's runs for (4,1,1) and (1,2,2) with reduce
    fp32 against curve:bf16c (the golden's (1,2,2) matches it within half
    of the tolerances) and (2,1,2) with reduce bf16 against
    curve:bf16c_reduce_bf16_n2: step 1 within BF16C_STEP1_RTOL, steps 2-10
    within BF16C_CURVE_RTOL (an envelope: see the tolerances below for why
    the curves cannot tell compute bf16 from fp32; step e does).
Prints one `ok` line per step or run; the first failure prints `FAIL ...` and
exits 1. The whole check takes about 20 s on 2 cores. --brief: gradients on
N = 2 only, the curves of (2,1,2) with either reduction and (1,1,4) with bf16
reduction, step d, and in compute bf16 the (2,1,2) reduce-bf16 curve.
--oracle-only: step a alone (no zcc/zrun).
"""
import argparse
import hashlib
import pathlib
import re
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "generate"))
import batches
from check_gradients import model_shapes, read_gradients
from check_training import read_loss_log
from common import CheckFailure, compile_train, main_wrapper, mpirun, run_tool
from round_weights import round_to_bf16  # numpy's rounding, not zplan's

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
GRAD_FLOOR = 1e-6  # of the largest |torch gradient| of any parameter
# Curves: max over the 10 steps of |zplan - torch| / |torch|. Sources:
#  - float32 arithmetic (kernels, summation orders, the AdamW update): zplan's
#    float32 curve (no --param-dtype) stays within 1.9e-6 of torch's float32
#    one over these 10 steps, and torch's bf16 curve moves by 8e-7 between
#    splits (the golden's split_spread_bf16);
#  - rounding flips: a master weight within that float32 noise of a bf16
#    rounding boundary rounds the other way in zplan than in torch, moving
#    one working weight by one bf16 ulp (2^-8 relative); each later step
#    carries the difference on. This multiplies the float32 noise by 5 to 10:
#    in torch, float32 noise added to the gradients moves the float32 curve
#    by 1e-7 and the bf16 curve by 1e-6 to 2e-5 (depending on its size);
#    zplan's bf16 curves measured 0.9e-5 to 1.04e-5 from torch's.
#  - with --reduce-dtype bf16, a per-rank gradient within float32 noise of a
#    bf16 boundary rounds the other way too (one ulp of that entry); where
#    the ranks' gradients nearly cancel, that can flip the sign of the sum,
#    and AdamW moves an entry by about lr * sign(m), 0.01 whatever |g| is.
#    The same mechanism makes the ORDER of a 4-rank bf16 sum move the curve
#    by 1e-4 to 5e-4 (the golden's n4_order_spread), and float32 noise of the
#    size above moves torch's reduce-bf16 curves by up to 4e-5 to 1.6e-4;
#    zplan measured 1e-5 to 2.1e-5.
# Hence two tolerances, each at least 2x above what zplan showed and 4x
# below the distance to the curves a wrong implementation would follow:
# every bf16 curve is 3.6e-4 to 6.7e-4 from curve:fp32 (no rounding), and
# each reduce-bf16 curve 3.6e-4 to 5e-4 from the reduce-fp32 curve:bf16.
# The bf16 reduction itself is checked exactly on gradients (step b2).
CURVE_RTOL = 5e-5  # --reduce-dtype fp32 (the default)
CURVE_RTOL_REDUCE_BF16 = 1e-4  # --reduce-dtype bf16
# --compute-dtype bf16 (steps e and f). Every matmul of a Linear layer takes
# bf16 operands and rounds its float32 sums to bf16 (torch autocast's bf16
# matmul), and each MLP's SiLU and gate product, whose operands are bf16,
# round their results too (autocast's type promotion). Two correct
# implementations differ where a value lies within their float32 noise of a
# bf16 rounding boundary: it rounds the other way and moves by one bf16 ulp
# (2^-8 relative, bf16's epsilon), and everything downstream moves with it.
# scripts/mp_goldens.py measures it as the same oracle in float32 against
# float64: on the gradients' input the loss 1.5e-8 apart and each tensor's
# gradient at most 1.7e-7 apart in ||.||_2 (no rounding fell the other
# way); a 10-step curve 2.4e-6 apart at step 1 and 4.4e-4 at most (one
# forward rounding fell the other way; AdamW's early, sign-like steps carry
# a flipped small gradient entry as a whole step). What the checks must tell
# apart is of the same kind, only everywhere: not rounding the matmuls'
# results moves the loss by 3.3e-5 and every gradient by at least 3.9e-3;
# not rounding the elementwise results by 5.5e-5 and 2.2e-3; computing in
# float32 by 1.5e-5 and 4.3e-3; step 1 of the curves by 3e-6 only, within
# the curves' noise. Hence: the loss within BF16C_LOSS_RTOL (67x the noise,
# 15x below compute fp32); each gradient within BF16C_GRAD_L2 = 2^-10, a
# quarter of bf16's epsilon (2.2x below not rounding the elementwise
# results, the nearest); the Linear weights' gradients exactly bf16 values
# (not rounding dW fails that); step 1 of a curve within BF16C_STEP1_RTOL
# (2.1x the noise) and steps 2-10 within BF16C_CURVE_RTOL (4.5x the noise):
# an envelope that catches a run gone wrong, not one that does not round.
# The golden refuses to be written when those margins shrink below 2x
# (10x for the loss).
BF16C_LOSS_RTOL = 1e-6
BF16C_GRAD_L2 = 2.0**-10
BF16C_STEP1_RTOL = 5e-6
BF16C_CURVE_RTOL = 2e-3
LR_RTOL = 1e-6
STEPS = 10
SEQ = 16
# The compute-fp32 checks name --compute-dtype fp32 (the default is the
# param dtype); the compute-bf16 ones rely on that default.
FLAGS = {"fp32": ["--compute-dtype", "fp32"],
         "bf16": ["--param-dtype", "bf16", "--compute-dtype", "fp32"],
         "bf16-reduce-bf16": ["--param-dtype", "bf16", "--reduce-dtype", "bf16",
                              "--compute-dtype", "fp32"],
         "bf16c": ["--param-dtype", "bf16"],
         "bf16c-reduce-bf16": ["--param-dtype", "bf16", "--reduce-dtype", "bf16"]}
# (B, K, N, configuration, golden curve; None: the N = 4 order curves)
CURVES = [
    (4, 1, 1, "bf16", "bf16"),
    (2, 1, 2, "bf16", "bf16"),
    (1, 1, 4, "bf16", "bf16"),
    (2, 2, 1, "bf16", "bf16"),
    (1, 2, 2, "bf16", "bf16"),
    (2, 1, 2, "bf16-reduce-bf16", "bf16_reduce_bf16_n2"),
    (1, 1, 4, "bf16-reduce-bf16", None),
    (1, 2, 2, "bf16-reduce-bf16", "bf16_reduce_bf16_n2_k2"),
]
BRIEF_CURVES = [CURVES[1], CURVES[5], CURVES[6]]
COMPUTE_CURVES = [
    (4, 1, 1, "bf16c", "bf16c"),
    (1, 2, 2, "bf16c", "bf16c"),
    (2, 1, 2, "bf16c-reduce-bf16", "bf16c_reduce_bf16_n2"),
]
BRIEF_COMPUTE_CURVES = [COMPUTE_CURVES[2]]
# Each compute-bf16 golden curve's compute-fp32 counterpart.
COMPUTE_FP32_CURVE = {"bf16c": "bf16", "bf16c_reduce_bf16_n2": "bf16_reduce_bf16_n2"}
STATS = re.compile(r"^zrun: per micro-step: gathered (\d+) B, reduced (\d+) B$", re.M)


def check_oracle(golden, shapes, data):
    names = [str(n) for n in golden["param_names"]]
    wanted = ["input_ids", "bf16:loss", "train_offsets", "train_data_sha256",
              "train_data_tokens", "curve_hyper", "curve_lr", "n4_orders",
              "n4_reference_order"]
    wanted += [f"curve:{c}" for c in ("fp32", "bf16", "bf16_reduce_bf16_n2",
                                      "bf16_reduce_bf16_n4", "bf16_reduce_bf16_n2_k2")]
    wanted += [f"n4_curve:{o}" for o in golden.get("n4_orders", [])]
    wanted += [f"{kind}:{n}" for n in names
               for kind in ("bf16:gradidx", "bf16:gradval", "bf16:gradmax", "fp32:gradval",
                            "bf16c:grad")]
    wanted += ["bf16c:loss", "bf16c:linear_names"]
    wanted += [f"curve:{c}" for c in ("bf16c", "bf16c_reduce_bf16_n2")]
    missing = [k for k in wanted if k not in golden]
    if missing:
        raise CheckFailure(f"golden: {len(missing)} keys missing, e.g. {missing[:4]}")
    if names != list(shapes):
        raise CheckFailure(f"golden parameters {len(names)} do not match the model's "
                           f"{len(shapes)} trainable initializers")
    for n in names:
        index = golden["bf16:gradidx:" + n]
        if index.min() < 0 or index.max() >= int(np.prod(shapes[n])):
            raise CheckFailure(f"golden: bf16:gradidx:{n} outside {list(shapes[n])}")
    for k in ["curve:" + c for c in ("fp32", "bf16", "bf16c")] + ["curve_lr"]:
        if golden[k].shape != (STEPS,) or not np.isfinite(golden[k]).all():
            raise CheckFailure(f"golden {k}: {golden[k]!r}, expected {STEPS} finite values")
    tokens = np.fromfile(data, dtype="<u2")
    digest = hashlib.sha256(pathlib.Path(data).read_bytes()).hexdigest()
    if len(tokens) != int(golden["train_data_tokens"]) or digest != str(golden["train_data_sha256"]):
        raise CheckFailure(f"{data}: {len(tokens)} tokens, sha256 {digest[:16]}; the golden "
                           f"was made from {int(golden['train_data_tokens'])} tokens, sha256 "
                           f"{str(golden['train_data_sha256'])[:16]}")
    batches.self_test()
    rows = int(golden["train_rows_per_step"])
    offsets = np.array([batches.step_offsets(int(golden["train_seed"]), s, rows, len(tokens),
                                             int(golden["train_seq_len"]))
                        for s in range(STEPS)], dtype=np.int64)
    if not np.array_equal(offsets, golden["train_offsets"]):
        raise CheckFailure("batches.py's row offsets differ from the golden's train_offsets")
    print(f"ok oracle: corpus {len(tokens)} tokens, {len(names)} parameters, "
          f"bf16 loss {float(golden['bf16:loss']):.6f}, {STEPS} steps of {rows} rows")


def loss_error(label, loss, reference):
    """|loss - reference| / |reference| for zrun's loss.npy."""
    loss = np.asarray(loss)
    if loss.size != 1 or not np.isfinite(loss).all():
        raise CheckFailure(f"{label}: loss.npy holds {loss!r}, expected one finite value")
    return abs(float(loss.reshape(())) - reference) / abs(reference)


def gradient_errors(label, golden, grads, shapes, key, rtol, away):
    """Our gradients at the golden's sampled entries against `key`:gradval
    and `away`:gradval, each as the largest ratio to the bound rtol * max
    |torch| of the tensor + GRAD_FLOOR * the largest max |torch|. Returns
    (the worst tensor, its ratio, the ratio against `away`)."""
    names = [str(n) for n in golden["param_names"]]
    missing = sorted(set(names) - set(grads))
    extra = sorted(set(grads) - set(names))
    if missing or extra:
        raise CheckFailure(f"{label}: gradients missing for {missing[:5]} ({len(missing)}), "
                           f"extra {extra[:5]} ({len(extra)})")
    floor = GRAD_FLOOR * max(float(golden[f"{key}:gradmax:{n}"]) for n in names)
    worst_name, worst, other = None, -1.0, 0.0
    for n in names:
        got = grads[n]
        if got.shape != shapes[n]:
            raise CheckFailure(f"{label}: gradient of {n} has shape {list(got.shape)}, the "
                               f"parameter is {list(shapes[n])}")
        if not np.isfinite(got).all():
            raise CheckFailure(f"{label}: gradient of {n} holds NaN or Inf")
        sampled = got.reshape(-1)[golden["bf16:gradidx:" + n]].astype(np.float64)
        bound = rtol * float(golden[f"{key}:gradmax:{n}"]) + floor
        ratio = float(np.abs(sampled - golden[f"{key}:gradval:{n}"]).max()) / bound
        other = max(other, float(np.abs(sampled - golden[f"{away}:gradval:{n}"]).max()) / bound)
        if ratio > worst:
            worst_name, worst = n, ratio
    if not worst <= 1.0:
        raise CheckFailure(f"{label}: gradient of {worst_name} at {worst:.2f} of the bound "
                           f"({rtol} * max |torch| + {floor:.1e}) at the sampled entries")
    return worst_name, worst, other


def compare_gradients(label, golden, loss, grads, shapes):
    reference = float(golden["bf16:loss"])
    error = loss_error(label, loss, reference)
    if not error <= LOSS_RTOL:
        raise CheckFailure(f"{label}: loss {float(np.asarray(loss).reshape(())):.9g}, torch with "
                           f"bf16 weights {reference:.9g} (relative error {error:.3e} > "
                           f"{LOSS_RTOL})")
    worst_name, worst, unrounded = gradient_errors(label, golden, grads, shapes, "bf16",
                                                   GRAD_RTOL, "fp32")
    if not unrounded > 1.0:
        raise CheckFailure(f"{label}: the gradients are within the bound of the UNROUNDED "
                           f"model's too ({unrounded:.2f}): the weights were not rounded")
    return error, worst_name, worst, unrounded


def compare_gradients_bf16c(label, golden, loss, grads, shapes):
    """Step e: the compute-bf16 golden (bf16c:), and away from the
    compute-fp32 one (bf16:) by more than the loss tolerance. Returns (the
    loss's error, its distance to compute fp32, the worst tensor and its
    ||g - torch|| / ||torch||, how many Linear gradients are bf16 values)."""
    reference = float(golden["bf16c:loss"])
    error = loss_error(label, loss, reference)
    if not error <= BF16C_LOSS_RTOL:
        raise CheckFailure(f"{label}: loss {float(np.asarray(loss).reshape(())):.9g}, torch "
                           f"computing in bf16 {reference:.9g} (relative error {error:.3e} > "
                           f"{BF16C_LOSS_RTOL})")
    names = [str(n) for n in golden["param_names"]]
    if sorted(grads) != sorted(names):
        raise CheckFailure(f"{label}: gradients of {sorted(grads)[:5]}..., the golden has "
                           f"{names[:5]}...")
    worst_name, worst = None, -1.0
    for n in names:
        got = grads[n]
        if got.shape != shapes[n] or not np.isfinite(got).all():
            raise CheckFailure(f"{label}: gradient of {n} is {list(got.shape)} (the parameter "
                               f"is {list(shapes[n])}) or not finite")
        torch_grad = golden["bf16c:grad:" + n].astype(np.float64).reshape(-1)
        distance = float(np.linalg.norm(got.reshape(-1).astype(np.float64) - torch_grad)
                         / np.linalg.norm(torch_grad))
        if distance > worst:
            worst_name, worst = n, distance
    if not worst <= BF16C_GRAD_L2:
        raise CheckFailure(f"{label}: gradient of {worst_name} is {worst:.2e} from torch's "
                           f"(||g - torch|| / ||torch|| > {BF16C_GRAD_L2:.2e})")
    linear = [str(n) for n in golden["bf16c:linear_names"]]
    for n in linear:
        got = np.ascontiguousarray(grads[n], dtype=np.float32)
        if not np.array_equal(got, round_to_bf16(got)):
            raise CheckFailure(f"{label}: the gradient of {n}, a Linear weight, holds values "
                               f"that are not bf16: the product dW was not rounded")
    to_fp32 = loss_error(label, loss, float(golden["bf16:loss"]))
    if not to_fp32 > BF16C_LOSS_RTOL:
        raise CheckFailure(f"{label}: the loss is within {BF16C_LOSS_RTOL} of the compute-fp32 "
                           f"golden's too ({to_fp32:.2e}): the matmuls were not rounded")
    return error, to_fp32, worst_name, worst, len(linear)


def zrun_gradients(args, label, precision, world, ids_path, shape, out):
    """Compiles the model with FLAGS[precision] on `world` ranks (input_ids of
    `shape`, every parameter sharded) and returns `zrun gradients`' loss and
    gradients on ids_path."""
    plan = out / f"grad-{precision}-{world}.zplan"
    compile_train(args.zcc, args.model, plan, world, f"input_ids={shape}", 0,
                  FLAGS[precision], label=label)
    directory = out / f"grads-{precision}-{world}"
    run_tool(f"{label}: zrun gradients",
             mpirun(world) + [args.zrun, str(plan), "gradients", "--input",
                              f"input_ids={ids_path}", "--output-dir", str(directory)])
    loss_path = directory / "loss.npy"
    if not loss_path.is_file():
        raise CheckFailure(f"{label}: {loss_path} was not written")
    return np.load(loss_path, allow_pickle=False), read_gradients(directory)


def write_ids(golden, out):
    """The golden's input_ids as OUT/input_ids.npy; returns the path and
    the --input-shape text."""
    ids_path = out / "input_ids.npy"
    np.save(ids_path, golden["input_ids"])
    return ids_path, "x".join(str(d) for d in golden["input_ids"].shape)


def print_identical(label, runs, worlds):
    """Whether N = worlds gave bitwise the same loss and gradients."""
    first = runs[worlds[0]]
    identical = all(np.array_equal(loss, first[0])
                    and all(np.array_equal(g[n], first[1][n]) for n in first[1])
                    for loss, g in runs.values())
    print(f"ok {label} N={','.join(map(str, worlds))} "
          f"identical-across-N={'yes' if identical else 'no'}")


def gradients(args, golden, shapes, out, worlds):
    ids_path, shape = write_ids(golden, out)
    runs = {}
    for world in worlds:
        label = f"{args.name} gradients bf16 N={world} persistence=0"
        loss, grads = zrun_gradients(args, label, "bf16", world, ids_path, shape, out)
        loss_error, worst, ratio, unrounded = compare_gradients(label, golden, loss, grads,
                                                                shapes)
        runs[world] = (loss, grads)
        print(f"ok {label} loss-rel-err {loss_error:.2e} worst {worst} at {ratio:.3f} of "
              f"the bound; unrounded weights' gradients at {unrounded:.1f}")
    print_identical(f"{args.name} gradients bf16", runs, worlds)
    return runs


def compute_bf16_gradients(args, golden, shapes, out, worlds):
    """Step e: zcc --param-dtype bf16 alone (compute bf16 by default)."""
    ids_path, shape = write_ids(golden, out)
    runs = {}
    for world in worlds:
        label = f"{args.name} gradients bf16 compute-bf16 N={world} persistence=0"
        loss, grads = zrun_gradients(args, label, "bf16c", world, ids_path, shape, out)
        error, to_fp32, worst, distance, linear = compare_gradients_bf16c(
            label, golden, loss, grads, shapes)
        runs[world] = (loss, grads)
        print(f"ok {label} loss-rel-err {error:.2e} worst {worst} at {distance:.2e} "
              f"(||g - torch|| / ||torch||); {linear} Linear gradients all bf16 values; "
              f"compute-fp32 loss at {to_fp32:.2e}")
    print_identical(f"{args.name} gradients bf16 compute-bf16", runs, worlds)


def reduce_bf16_gradients(args, golden, out, worlds, runs):
    """--reduce-dtype bf16 on the same input on every rank: each rank rounds
    the same float32 gradient g to b = bf16(g); N = 2 sums b + b = 2b in bf16
    (exact) and scales by 1/2: exactly b. N = 4 gives exactly b when MPI adds
    pairs first (4b = 2b + 2b); added one by one, 3b rounds: within one bf16
    ulp of b (2^-7 relative) then."""
    ids_path = out / "input_ids.npy"
    shape = "x".join(str(d) for d in golden["input_ids"].shape)
    for world in worlds:
        label = f"{args.name} gradients bf16 reduce-bf16 N={world} persistence=0"
        loss, grads = zrun_gradients(args, label, "bf16-reduce-bf16", world, ids_path,
                                     shape, out)
        ref_loss, ref = runs[world]
        if sorted(grads) != sorted(ref) or not np.array_equal(loss, ref_loss):
            raise CheckFailure(f"{label}: loss {loss!r} (reduce fp32: {ref_loss!r}) or "
                               "the parameters listed differ from the reduce-fp32 run")
        differ, total, worst = 0, 0, 0.0
        for n, g in ref.items():
            expected = round_to_bf16(g)
            got = grads[n]
            if got.shape != g.shape or not np.isfinite(got).all():
                raise CheckFailure(f"{label}: gradient of {n}: shape {list(got.shape)} or "
                                   "not finite")
            off = got != expected
            differ += int(off.sum())
            total += g.size
            if off.any():
                worst = max(worst, float(np.max(np.abs(got - expected)[off]
                                                / np.abs(expected)[off])))
        if differ and (world <= 2 or not worst <= 2.0 ** -7):
            raise CheckFailure(f"{label}: {differ} of {total} gradient entries differ from "
                               f"the bf16 rounding of the reduce-fp32 run's (largest "
                               f"relative difference {worst:.2e})")
        print(f"ok {label} gradients == bf16(reduce-fp32 gradients): "
              f"{total - differ} of {total} entries exactly")


def train(args, golden, out, batch, k_steps, world, config, steps=STEPS, stats=False):
    """One zrun train run; returns (losses, lrs, stdout)."""
    lr, beta1, beta2, eps, weight_decay, warmup, _ = golden["curve_hyper"].tolist()
    tag = f"{config}-{batch}-{k_steps}-{world}" + ("-stats" if stats else "")
    label = (f"{args.name} {config} B={batch} K={k_steps} N={world} persistence=0"
             + (" stats" if stats else ""))
    plan = out / f"{config}-{batch}-{k_steps}-{world}.zplan"
    if plan not in args.compiled:  # the stats run reuses its split's plan
        args.compiled.add(plan)
        compile_train(args.zcc, args.model, plan, world, f"input_ids={batch}x{SEQ}", 0,
                      FLAGS[config], label=label)
    log = out / f"{tag}.log"
    command = mpirun(world) + [
        args.zrun, str(plan), "train", "--data", args.data,
        "--steps", str(steps), "--seed", str(int(golden["train_seed"])),
        "--grad-accum", str(k_steps), "--lr", repr(lr),
        "--weight-decay", repr(weight_decay), "--warmup", str(int(warmup)),
        "--loss-log", str(log),
        "--beta1", repr(beta1), "--beta2", repr(beta2), "--eps", repr(eps)]
    if stats:
        command.append("--stats")
    done = run_tool(f"{label}: zrun train", command)
    losses, lrs = read_loss_log(log, label)
    return label, losses, lrs, done.stdout


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


def logged_curve(args, golden, out, batch, k_steps, world, config):
    """One run's label and its STEPS logged losses (the lr checked)."""
    label, losses, lrs, _ = train(args, golden, out, batch, k_steps, world, config)
    if losses.shape != (STEPS,):
        raise CheckFailure(f"{label}: {len(losses)} logged steps, expected {STEPS}")
    if not (np.abs(lrs - golden["curve_lr"]) <= LR_RTOL * golden["curve_lr"]).all():
        raise CheckFailure(f"{label}: logged lr {lrs.tolist()}, expected "
                           f"{golden['curve_lr'].tolist()}")
    return label, losses


def curve(args, golden, out, batch, k_steps, world, config, key):
    label, losses = logged_curve(args, golden, out, batch, k_steps, world, config)
    note = ""
    tolerance = CURVE_RTOL if config == "bf16" else CURVE_RTOL_REDUCE_BF16
    if key is None:
        # N = 4 with bf16 sums: the order MPI added the ranks in is its own.
        orders = [str(o) for o in golden["n4_orders"]]
        errors = {o: rel(losses, golden["n4_curve:" + o]) for o in orders}
        order, runner_up = sorted(errors, key=errors.get)[:2]
        reference_order = str(golden["n4_reference_order"])
        reference = golden["n4_curve:" + order]
        note = (f" order {order} (next {runner_up} {errors[runner_up]:.2e}; reference "
                f"order {reference_order} {errors[reference_order]:.2e})")
        key = f"n4_curve:{order}"
    else:
        reference = golden["curve:" + key]
        key = "curve:" + key
    error = np.abs(losses - reference) / np.abs(reference)
    to_fp32 = rel(losses, golden["curve:fp32"])
    if not (error <= tolerance).all():
        step = int(np.argmax(error))
        raise CheckFailure(f"{label}: step {step + 1} loss {losses[step]:.9g}, torch "
                           f"{reference[step]:.9g} (relative error {error[step]:.3e} > "
                           f"{tolerance}; golden {key}; per step "
                           f"{' '.join(f'{e:.1e}' for e in error)}; curve:fp32 at "
                           f"{to_fp32:.2e}){note}")
    if not to_fp32 > float(error.max()):
        raise CheckFailure(f"{label}: closer to the unrounded curve:fp32 ({to_fp32:.2e}) "
                           f"than to {key} ({float(error.max()):.2e})")
    if config != "bf16":
        to_reduce_fp32 = rel(losses, golden["curve:bf16"])
        if not to_reduce_fp32 > float(error.max()):
            raise CheckFailure(f"{label}: closer to the reduce-fp32 curve:bf16 "
                               f"({to_reduce_fp32:.2e}) than to {key} "
                               f"({float(error.max()):.2e}): no bf16 reduction?")
        note = f" (vs reduce-fp32 {to_reduce_fp32:.2e})" + note
    print(f"ok {label} max-rel-err {float(error.max()):.2e} (vs fp32 {to_fp32:.2e}){note}")
    return float(error.max())


def compute_curve(args, golden, out, batch, k_steps, world, config, key):
    """Step f: step 1 within BF16C_STEP1_RTOL of curve:`key`, steps 2-10
    within BF16C_CURVE_RTOL; the distance to the compute-fp32 counterpart is
    printed (it lies within the float32 noise: step e tells them apart)."""
    label, losses = logged_curve(args, golden, out, batch, k_steps, world, config)
    reference = golden["curve:" + key]
    error = np.abs(losses - reference) / np.abs(reference)
    tolerance = np.full(STEPS, BF16C_CURVE_RTOL)
    tolerance[0] = BF16C_STEP1_RTOL
    counterpart = COMPUTE_FP32_CURVE[key]
    other = golden["curve:" + counterpart]
    to_fp32_compute = np.abs(losses - other) / np.abs(other)
    if not (error <= tolerance).all():
        step = int(np.argmax(error / tolerance))
        raise CheckFailure(f"{label}: step {step + 1} loss {losses[step]:.9g}, torch "
                           f"{reference[step]:.9g} (relative error {error[step]:.3e} > "
                           f"{tolerance[step]}; golden curve:{key}; per step "
                           f"{' '.join(f'{e:.1e}' for e in error)}; curve:{counterpart} at "
                           f"{' '.join(f'{e:.1e}' for e in to_fp32_compute)})")
    print(f"ok {label} step-1-rel-err {error[0]:.2e} max-rel-err {float(error.max()):.2e} "
          f"(compute fp32 step 1 {to_fp32_compute[0]:.2e}, at most "
          f"{float(to_fp32_compute.max()):.2e}; vs fp32 {rel(losses, golden['curve:fp32']):.2e})")
    return float(error.max())


def stats(args, golden, out):
    """Bytes of one micro-step of B=2 K=1 N=2 in the three configurations."""
    seen = {}
    for config in ("fp32", "bf16", "bf16-reduce-bf16"):
        label, _, _, stdout = train(args, golden, out, 2, 1, 2, config, steps=1, stats=True)
        found = STATS.findall(stdout)
        if len(found) != 1:
            raise CheckFailure(f"{label}: expected one `zrun: per micro-step: gathered X B, "
                               f"reduced Y B` line on stdout, found {len(found)}")
        seen[config] = tuple(int(v) for v in found[0])
    (g32, r32), (g16, r16), (gr16, rr16) = (seen[c] for c in
                                            ("fp32", "bf16", "bf16-reduce-bf16"))
    if not (g16 * 2 == g32 and gr16 == g16 and r16 == r32 and rr16 * 2 == r32 and g32 > 0
            and r32 > 0):
        raise CheckFailure(f"{args.name} stats B=2 K=1 N=2: gathered/reduced bytes fp32 "
                           f"{g32}/{r32}, bf16 {g16}/{r16}, bf16 reduce bf16 {gr16}/{rr16}; "
                           "expected bf16 gathers half of fp32, reduces the same, and "
                           "half with --reduce-dtype bf16")
    print(f"ok {args.name} stats B=2 K=1 N=2 gathered fp32 {g32} B bf16 {g16} B; "
          f"reduced fp32 {r32} B bf16 {r16} B bf16-reduce-bf16 {rr16} B")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("--zrun", default="zrun")
    parser.add_argument("--model", required=True, help="the .onnx fixture (llama-opset17)")
    parser.add_argument("--golden", required=True, help="its -bf16.npz golden")
    parser.add_argument("--data", required=True, help="the golden's token file")
    parser.add_argument("--out", required=True, help="a scratch directory")
    parser.add_argument("--oracle-only", action="store_true",
                        help="check the golden and the corpus, run nothing")
    parser.add_argument("--brief", action="store_true",
                        help="gradients on 2 ranks, three curves, the byte counts")
    args = parser.parse_args()
    args.name = pathlib.Path(args.model).stem
    args.compiled = set()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    golden = dict(np.load(args.golden, allow_pickle=False))
    shapes = model_shapes(args.model)
    check_oracle(golden, shapes, args.data)
    if args.oracle_only:
        return
    worlds = [2] if args.brief else [1, 2, 4]
    runs = gradients(args, golden, shapes, out, worlds)
    reduce_bf16_gradients(args, golden, out, worlds, runs)
    for batch, k_steps, world, config, key in (BRIEF_CURVES if args.brief else CURVES):
        curve(args, golden, out, batch, k_steps, world, config, key)
    stats(args, golden, out)
    compute_bf16_gradients(args, golden, shapes, out, worlds)
    for batch, k_steps, world, config, key in (BRIEF_COMPUTE_CURVES if args.brief
                                               else COMPUTE_CURVES):
        compute_curve(args, golden, out, batch, k_steps, world, config, key)


if __name__ == "__main__":
    main_wrapper(main)
