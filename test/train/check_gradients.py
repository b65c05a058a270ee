"""zcc --mode train + `zrun PLAN gradients` against torch's autograd.

For one fixture model, each world size N (1, 2, 4) and each persistence
threshold (zcc's default, under which every tiny parameter stays whole, and 0,
under which every parameter is sharded):

    zcc MODEL --mode train --world-size N --input-shape input_ids=2x8
        [--persistence-threshold 0] -o PLAN
    mpirun -np N zrun PLAN gradients --input input_ids=IDS.npy --output-dir DIR

plus one run on the largest N with --persistence-threshold 0 --bucket-size
16KiB (many groups, each padded and reduce-scattered on its own), and, for a
golden with `labels` (GPT-2's), N = 1 at the default threshold and N = 2 at 0
compiled with `--input-shape labels=2x8` too and run with `--input
labels=LABELS.npy` (its -100 entries are ignored targets). It then compares DIR with the golden made by `scripts/export_fixtures.py
--train-goldens` (torch, float64, weights read from the same ONNX file):
  - DIR/loss.npy: |ours - torch| <= 1e-5 * |torch|;
  - DIR/gradients.txt lists every parameter of the golden exactly once (a
    missing or an extra name fails), each file has the parameter's shape;
  - per parameter: max |ours - torch| <= 1e-4 * max |torch| of that tensor
    + 1e-6 * the largest |torch| of any tensor. The floor is for gradients that
    are zero analytically: attention's key bias (OPT) gets exactly 0 (a bias
    added to every key shifts a softmax row by a constant), which float32
    leaves at ~2e-10 while the largest gradient is ~0.4; a wrong rule misses
    by far more. torch's own float32 run stays within 1% of this bound (the
    golden's f32_grad_bound_ratio).
Prints one `ok` line per run with the loss error and the worst tensor and its
ratio to the bound; the first failure prints `FAIL ...` and exits 1.

--golden-model ORIGINAL runs MODEL against ORIGINAL's golden: MODEL is
ORIGINAL with its tied weight stored twice (split_tie.py), which zcc must
train as ORIGINAL's one parameter, so gradients.txt lists ORIGINAL's
parameters and the tied one's gradient is the sum of both uses.

First (and with --oracle-only, without zcc/zrun) it checks that the golden
belongs to the model (to ORIGINAL with --golden-model): its parameter names are exactly the model's trainable
initializers (float, more than one element: zcc's rule), in file order, each
gradient has its initializer's shape, the values are finite, and input_ids is
int64 [2, 8] within the vocabulary.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.dont_write_bytecode = True
from common import CheckFailure, compile_train, main_wrapper, mpirun, run_tool

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
GRAD_FLOOR = 1e-6  # of the largest |torch gradient| of any parameter
SMALL_BUCKET = "16KiB"


def read_gradients(directory):
    """name -> array from DIR/gradients.txt (`name<TAB>file` lines)."""
    listing = directory / "gradients.txt"
    if not listing.is_file():
        raise CheckFailure(f"{listing} was not written")
    out = {}
    for number, line in enumerate(listing.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise CheckFailure(f"{listing}:{number}: expected `name<TAB>file`, got {line!r}")
        name, file = parts
        if name in out:
            raise CheckFailure(f"{listing}:{number}: {name} listed twice")
        path = pathlib.Path(file)
        if not path.is_absolute():
            path = directory / path
        out[name] = np.load(path, allow_pickle=False)
    return out


def compare(label, golden, ours_loss, ours, prefix=""):
    """prefix "" compares with the input_ids-only golden, "labels_" with the
    one that has an explicit labels input."""
    names = [str(n) for n in golden["param_names"]]
    missing = sorted(set(names) - set(ours))
    extra = sorted(set(ours) - set(names))
    if missing or extra:
        raise CheckFailure(f"{label}: gradients missing for {missing[:5]}"
                           f"{' ...' if len(missing) > 5 else ''} ({len(missing)}), "
                           f"extra {extra[:5]} ({len(extra)})")
    reference_loss = float(golden[prefix + "loss"])
    loss = np.asarray(ours_loss)
    if loss.size != 1 or not np.isfinite(loss).all():
        raise CheckFailure(f"{label}: loss.npy holds {loss!r}, expected one finite value")
    loss_error = abs(float(loss.reshape(())) - reference_loss) / abs(reference_loss)
    if not loss_error <= LOSS_RTOL:
        raise CheckFailure(f"{label}: loss {float(loss.reshape(())):.9g}, torch "
                           f"{reference_loss:.9g} (relative error {loss_error:.3e} > {LOSS_RTOL})")
    worst_name, worst_ratio = None, -1.0
    floor = GRAD_FLOOR * max(float(np.abs(golden[prefix + "grad:" + n]).max()) for n in names)
    for name in names:
        reference = golden[prefix + "grad:" + name]
        got = ours[name]
        if got.shape != reference.shape:
            raise CheckFailure(f"{label}: gradient of {name} has shape {list(got.shape)}, "
                               f"the parameter is {list(reference.shape)}")
        if not np.isfinite(got).all():
            raise CheckFailure(f"{label}: gradient of {name} holds NaN or Inf")
        bound = GRAD_RTOL * float(np.abs(reference).max()) + floor
        ratio = float(np.abs(got.astype(np.float64) - reference).max()) / bound
        if ratio > worst_ratio:
            worst_name, worst_ratio = name, ratio
    if not worst_ratio <= 1.0:
        reference = golden[prefix + "grad:" + worst_name]
        error = float(np.abs(ours[worst_name] - reference).max())
        raise CheckFailure(f"{label}: gradient of {worst_name}: max |ours - torch| {error:.3e} > "
                           f"{GRAD_RTOL} * max |torch| {float(np.abs(reference).max()):.3e} + "
                           f"{floor:.1e} (ratio to the bound {worst_ratio:.2f})")
    return loss_error, worst_name, worst_ratio


def model_shapes(model_path):
    """The trainable initializers (float, more than one element: zcc's rule),
    name -> shape, in file order."""
    import onnx  # only here: the comparison itself needs numpy alone
    model = onnx.load_model(model_path, load_external_data=False)
    shapes = {}
    for tensor in model.graph.initializer:
        count = int(np.prod(tensor.dims)) if tensor.dims else 1
        floating = tensor.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                        onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
        if floating and count > 1:
            shapes[tensor.name] = tuple(tensor.dims)
    return shapes


def check_golden(golden, model_path):
    shapes = model_shapes(model_path)
    names = [str(n) for n in golden["param_names"]]
    if names != list(shapes):
        raise CheckFailure(f"golden parameters {len(names)} do not match {model_path}'s "
                           f"{len(shapes)} trainable initializers: only in the golden "
                           f"{sorted(set(names) - set(shapes))[:5]}, only in the model "
                           f"{sorted(set(shapes) - set(names))[:5]}")
    for name in names:
        grad = golden["grad:" + name]
        if grad.shape != shapes[name] or not np.isfinite(grad).all():
            raise CheckFailure(f"golden gradient of {name}: shape {list(grad.shape)}, "
                               f"initializer {list(shapes[name])}, or not finite")
    ids = golden["input_ids"]
    if ids.dtype != np.int64 or ids.shape != (2, 8) or ids.min() < 0 or ids.max() >= 256:
        raise CheckFailure(f"golden input_ids: {ids.dtype} {list(ids.shape)}")
    if "labels" in golden:
        labels = golden["labels"]
        ignored = labels == -100
        if (labels.dtype != np.int64 or labels.shape != ids.shape or not ignored.any()
                or not np.array_equal(labels[~ignored], ids[~ignored])
                or sorted(golden.get("labels_grad:" + n) is not None for n in names) != [True] * len(names)):
            raise CheckFailure("golden labels: expected input_ids with some -100 entries and "
                               "a labels_grad: per parameter")
    print(f"ok golden: {len(names)} parameters of {pathlib.Path(model_path).name}, "
          f"loss {float(golden['loss']):.6f}"
          + (f", with labels {float(golden['labels_loss']):.6f}" if "labels" in golden else "")
          + f", torch float32 at "
          f"{float(golden['f32_grad_bound_ratio']):.1e} of the bound")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("--zrun", default="zrun")
    parser.add_argument("--model", required=True, action="append",
                        help="the .onnx fixture (with --oracle-only: repeatable)")
    parser.add_argument("--golden", required=True, action="append",
                        help="its .npz golden (with --oracle-only: one per --model)")
    parser.add_argument("--out", required=True, help="a scratch directory")
    parser.add_argument("--worlds", default="1,2,4")
    parser.add_argument("--thresholds", default="default,0",
                        help="persistence thresholds; `default` passes none")
    parser.add_argument("--oracle-only", action="store_true",
                        help="check the golden against the model, run nothing")
    parser.add_argument("--golden-model",
                        help="the model the golden was made from, when --model "
                             "is it with a tied weight stored twice")
    args = parser.parse_args()
    if len(args.model) != len(args.golden) or (len(args.model) > 1 and not args.oracle_only):
        parser.error("one --golden per --model; several only with --oracle-only")
    if args.oracle_only:
        for model, golden in zip(args.model, args.golden):
            check_golden(dict(np.load(golden, allow_pickle=False)), model)
        return
    args.model, args.golden = args.model[0], args.golden[0]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = pathlib.Path(args.model).stem
    golden = dict(np.load(args.golden, allow_pickle=False))
    check_golden(golden, args.golden_model or args.model)
    ids = golden["input_ids"]
    ids_path = out / "input_ids.npy"
    np.save(ids_path, ids)
    shape = "x".join(str(d) for d in ids.shape)

    # (world, persistence threshold, bucket size, with labels)
    runs = [(int(world), threshold, None, False) for world in args.worlds.split(",")
            for threshold in args.thresholds.split(",")]
    # Many small groups: reduce-scatters of several groups, each padded.
    runs.append((max(int(w) for w in args.worlds.split(",")), "0", SMALL_BUCKET, False))
    if "labels" in golden:
        # With an explicit labels input (-100 = ignored): one rank whole, two sharded.
        labels_path = out / "labels.npy"
        np.save(labels_path, golden["labels"])
        runs += [(1, "default", None, True), (2, "0", None, True)]
    for world, threshold, bucket, with_labels in runs:
        threshold = None if threshold == "default" else int(threshold)
        shown = "default" if threshold is None else str(threshold)
        suffix = (f" bucket={bucket}" if bucket else "") + (" labels" if with_labels else "")
        label = f"{name} N={world} persistence={shown}{suffix}"
        tag = f"{world}-{shown}{suffix.replace(' ', '-').replace('=', '')}"
        plan = out / f"{name}-{tag}.zplan"
        extra, inputs = [], ["--input", f"input_ids={ids_path}"]
        if bucket:
            extra += ["--bucket-size", bucket]
        if with_labels:
            extra += ["--input-shape", f"labels={shape}"]
            inputs += ["--input", f"labels={labels_path}"]
        compile_train(args.zcc, args.model, plan, world, f"input_ids={shape}", threshold,
                      extra, label=label)
        directory = out / f"grads-{tag}"
        run_tool(f"{label}: zrun gradients",
                 mpirun(world) + [args.zrun, str(plan), "gradients"] + inputs
                 + ["--output-dir", str(directory)])
        loss_path = directory / "loss.npy"
        if not loss_path.is_file():
            raise CheckFailure(f"{label}: {loss_path} was not written")
        loss = np.load(loss_path, allow_pickle=False)
        loss_error, worst, ratio = compare(label, golden, loss, read_gradients(directory),
                                           "labels_" if with_labels else "")
        print(f"ok {label} loss-rel-err {loss_error:.2e} worst {worst} "
              f"at {ratio:.3f} of the bound")


if __name__ == "__main__":
    main_wrapper(main)
