"""Oracles for test/zrun/export.test: an exported model against onnxruntime.

  tokens OUT COUNT SEED        write COUNT uint16 tokens below 256 (the
                               fixtures' vocabulary) to OUT
  reshape ORIGINAL OUT NAME    write ORIGINAL with initializer NAME's two
                               dims swapped (same bytes) to OUT
  diverge STEPDIR RANK REGION  flip one bit of rank RANK's region REGION in
                               checkpoint STEPDIR and seal its manifest
                               again (region and end checksums), as a rank
                               that computed differently would leave it
  same ORIGINAL EXPORTED [--external]
                               every initializer of EXPORTED equals
                               ORIGINAL's bit for bit (dtype, shape, bytes;
                               external data read where it lies), no
                               initializer is external (with --external:
                               every one of 1 KiB or more is, in
                               EXPORTED.data), and onnxruntime's
                               logits of both are equal on one batch
  loss ORIGINAL EXPORTED --tokens F --loss-log L --step S --world N
       --rows B --seq T [--seed X]
                               the causal-LM loss of EXPORTED on the batch
                               of training step S (1-based, as the loss log
                               numbers it; rows re-derived from the formula
                               in runtime/train/BatchSampler.h) equals the
                               loss zrun logged for step S within 1e-5
                               relative; EXPORTED's weights differ from
                               ORIGINAL's (the training moved them)

  tied EXPORTED PARAM COPY    the exported COPY equals the exported PARAM,
                               bit for bit: transposed when its 2-D shape is
                               PARAM's reversed, else directly (a tied copy
                               written back consistently)
  frozen ORIGINAL EXPORTED NAME...
                               each NAME is bit for bit the original's (not
                               trained), and some other initializer is not

Prints one `ok ...` line, or `FAIL ...` and exits 1.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_file  # noqa: E402  (runtime/support/Checksum.h in NumPy)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "generate"))
from round_weights import round_to_bf16  # noqa: E402  (numpy's rounding, not zplan's)

MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def row_offsets(seed, step, rows, num_tokens, seq):
    key = splitmix64(seed ^ ((0x9E3779B97F4A7C15 * (step + 1)) & MASK))
    return [splitmix64((key + q) & MASK) % (num_tokens - seq) for q in range(rows)]


def initializers(path):
    model = onnx.load(path)  # loads external data beside the model
    return model, {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def fail(message):
    print("FAIL " + message)
    return 1


def same(args):
    original_model, original = initializers(args.original)
    exported_model, exported = initializers(args.exported)
    if list(original) != list(exported):
        return fail(f"initializer names differ: {list(original)} vs {list(exported)}")
    for name, value in original.items():
        other = exported[name]
        if value.dtype != other.dtype or value.shape != other.shape:
            return fail(f"{name}: {other.dtype}{other.shape}, original "
                        f"{value.dtype}{value.shape}")
        if value.tobytes() != other.tobytes():
            return fail(f"{name}: bytes differ")
    raw = onnx.load(args.exported, load_external_data=False)
    external = [t.name for t in raw.graph.initializer
                if t.data_location == onnx.TensorProto.EXTERNAL]
    if args.external:
        large = [t.name for t in raw.graph.initializer
                 if t.data_location == onnx.TensorProto.EXTERNAL or len(t.raw_data) >= 1024]
        locations = {e.value for t in raw.graph.initializer
                     for e in t.external_data if e.key == "location"}
        expected = os.path.basename(args.exported) + ".data"
        if not external or external != large or locations != {expected}:
            return fail(f"external initializers {external} in {locations}; "
                        f"expected {large} in {expected}")
    elif external:
        return fail(f"initializers kept in external data: {external}")
    if original_model.graph.node != exported_model.graph.node:
        return fail("the graph's nodes differ")
    ids = np.random.default_rng(5).integers(0, 256, size=(2, 32), dtype=np.int64)
    a = session(args.original).run(["logits"], {"input_ids": ids})[0]
    b = session(args.exported).run(["logits"], {"input_ids": ids})[0]
    if not np.array_equal(a, b):
        return fail(f"logits differ by {np.abs(a - b).max()}")
    where = f", {len(external)} in external data" if args.external else ""
    print(f"ok same: {len(original)} initializers bit for bit{where}, logits equal")
    return 0


def causal_lm_loss(logits, ids):
    logits = logits[:, :-1].astype(np.float64)
    targets = ids[:, 1:]
    top = logits.max(axis=-1, keepdims=True)
    logsumexp = np.log(np.exp(logits - top).sum(axis=-1)) + top[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return float((logsumexp - picked).mean())


def loss(args):
    _, original = initializers(args.original)
    _, exported = initializers(args.exported)
    moved = [n for n in original if original[n].tobytes() != exported[n].tobytes()]
    if not moved:
        return fail("no weight differs from the original: training changed nothing")
    tokens = np.fromfile(args.tokens, dtype="<u2").astype(np.int64)
    logged = None
    with open(args.loss_log) as log:
        for line in log:
            step, value, _ = line.rstrip("\n").split("\t")
            if int(step) == args.step:
                logged = float(value)
    if logged is None:
        return fail(f"the loss log has no step {args.step}")
    offsets = row_offsets(args.seed, args.step - 1, args.world * args.rows,
                          len(tokens), args.seq)
    run = session(args.exported)
    losses = []
    for rank in range(args.world):
        rows = offsets[rank * args.rows:(rank + 1) * args.rows]
        ids = np.stack([tokens[o:o + args.seq] for o in rows])
        logits = run.run(["logits"], {"input_ids": ids})[0]
        losses.append(causal_lm_loss(logits, ids))
    computed = sum(losses) / len(losses)
    error = abs(computed - logged) / abs(logged)
    if not error <= 1e-5:
        return fail(f"step {args.step}: onnxruntime loss {computed!r}, zrun "
                    f"logged {logged!r} (relative error {error:.3g})")
    print(f"ok loss: step {args.step} loss matches zrun's within 1e-5 "
          f"({len(moved)} of {len(original)} initializers trained)")
    return 0


def tied(args):
    _, exported = initializers(args.exported)
    for name in (args.param, args.copy):
        if name not in exported:
            return fail(f"{args.exported} has no initializer {name}")
    param, copy = exported[args.param], exported[args.copy]
    forms = [("", param)] + ([("^T", np.ascontiguousarray(param.T))] if param.ndim == 2 else [])
    for suffix, expected in forms:
        if (copy.dtype == expected.dtype and copy.shape == expected.shape
                and copy.tobytes() == expected.tobytes()):
            print(f"ok tied: {args.copy} = {args.param}{suffix} bit for bit")
            return 0
    return fail(f"{args.copy} ({copy.dtype}{list(copy.shape)}) equals neither {args.param} "
                f"({param.dtype}{list(param.shape)}) nor its transpose")


def frozen(args):
    _, original = initializers(args.original)
    _, exported = initializers(args.exported)
    for name in args.names:
        if original[name].tobytes() != exported[name].tobytes():
            return fail(f"{name} changed: frozen parameters are not trained")
    moved = [n for n in original if n not in args.names
             and original[n].tobytes() != exported[n].tobytes()]
    if not moved:
        return fail("no other initializer changed: training changed nothing")
    print(f"ok frozen: {len(args.names)} unchanged, {len(moved)} of "
          f"{len(original) - len(args.names)} others trained")
    return 0


def diverge(args):
    manifest_path = os.path.join(args.stepdir, "manifest.txt")
    lines = open(manifest_path).read().splitlines()
    offset = 0
    for index, line in enumerate(lines):
        fields = line.split("\t")
        if fields[0] != "region" or int(fields[1]) != args.rank:
            continue
        size = int(fields[2])
        if fields[4] == args.region:
            if size == 0:
                return fail(f"rank {args.rank}'s region {args.region} is empty")
            path = os.path.join(args.stepdir, f"rank-{args.rank}.bin")
            with open(path, "r+b") as file:
                file.seek(offset)
                data = bytearray(file.read(size))
                data[0] ^= 1
                file.seek(offset)
                file.write(data)
            fields[3] = "0x%016x" % plan_file.checksum(data)
            lines[index] = "\t".join(fields)
            body = "".join(l + "\n" for l in lines if not l.startswith("end\t"))
            body += "end\t0x%016x\n" % plan_file.checksum(body.encode())
            open(manifest_path, "w").write(body)
            print(f"ok diverge: rank {args.rank} {args.region}")
            return 0
        offset += size
    return fail(f"no region {args.region} for rank {args.rank}")


def bf16(args):
    """export --dtype bf16 of an unchanged (lr 0) checkpoint: every float
    initializer of more than one element (zcc's parameters) is stored as
    NAME/bf16 in BFLOAT16 holding the original rounded to nearest even and
    read by a Cast to FLOAT named NAME; every other initializer is kept bit
    for bit; onnxruntime's logits equal those of the original with those
    initializers rounded in place; the parameters take half the bytes."""
    original_model, original = initializers(args.original)
    exported_model = onnx.load(args.exported)
    exported = {t.name: t for t in exported_model.graph.initializer}
    casts = {n.output[0]: n for n in exported_model.graph.node if n.op_type == "Cast"
             and n.input[0].endswith("/bf16")}
    rounded_model = onnx.load(args.original)
    converted = 0
    for index, tensor in enumerate(rounded_model.graph.initializer):
        value = original[tensor.name]
        if value.dtype != np.float32 or value.size <= 1:
            if tensor.name not in exported or \
                    numpy_helper.to_array(exported[tensor.name]).tobytes() != value.tobytes():
                return fail(f"{tensor.name}: not kept as it was")
            continue
        stored = exported.get(tensor.name + "/bf16")
        cast = casts.get(tensor.name)
        if stored is None or stored.data_type != onnx.TensorProto.BFLOAT16 or cast is None:
            return fail(f"{tensor.name}: no BFLOAT16 initializer {tensor.name}/bf16 read by a Cast")
        bits = np.frombuffer(stored.raw_data, dtype=np.uint16).astype(np.uint32) << 16
        expected = round_to_bf16(value)
        if bits.view(np.float32).reshape(value.shape).tobytes() != expected.tobytes():
            return fail(f"{tensor.name}: bf16 values are not the original rounded to nearest even")
        rounded_model.graph.initializer[index].CopyFrom(numpy_helper.from_array(expected, tensor.name))
        converted += 1
    ids = np.random.default_rng(5).integers(0, 256, size=(2, 32), dtype=np.int64)
    a = session(rounded_model.SerializeToString()).run(["logits"], {"input_ids": ids})[0]
    b = session(args.exported).run(["logits"], {"input_ids": ids})[0]
    if not np.array_equal(a, b):
        return fail(f"logits differ from the rounded original's by {np.abs(a - b).max()}")
    full = os.path.getsize(args.original)
    half = os.path.getsize(args.exported)
    if half >= full:
        return fail(f"the bf16 export is {half} B, the original {full} B")
    print(f"ok bf16: {converted} initializers stored as bf16, logits equal the rounded "
          f"original's; file {half} B vs {full} B ({half / full:.3f})")
    return 0


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    tokens = commands.add_parser("tokens")
    tokens.add_argument("out")
    tokens.add_argument("count", type=int)
    tokens.add_argument("seed", type=int)
    for name in ("same", "loss", "bf16"):
        command = commands.add_parser(name)
        command.add_argument("original")
        command.add_argument("exported")
    commands.choices["same"].add_argument("--external", action="store_true")
    divergence = commands.add_parser("diverge")
    divergence.add_argument("stepdir")
    divergence.add_argument("rank", type=int)
    divergence.add_argument("region")
    tie = commands.add_parser("tied")
    tie.add_argument("exported")
    tie.add_argument("param")
    tie.add_argument("copy")
    freeze = commands.add_parser("frozen")
    freeze.add_argument("original")
    freeze.add_argument("exported")
    freeze.add_argument("names", nargs="+")
    reshape = commands.add_parser("reshape")
    reshape.add_argument("original")
    reshape.add_argument("out")
    reshape.add_argument("name")
    check = commands.choices["loss"]
    check.add_argument("--tokens", required=True)
    check.add_argument("--loss-log", required=True)
    check.add_argument("--step", type=int, required=True)
    check.add_argument("--world", type=int, required=True)
    check.add_argument("--rows", type=int, required=True)
    check.add_argument("--seq", type=int, required=True)
    check.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.command == "tokens":
        rng = np.random.default_rng(args.seed)
        rng.integers(0, 256, args.count).astype("<u2").tofile(args.out)
        print(f"ok tokens: {args.count}")
        return 0
    if args.command == "diverge":
        return diverge(args)
    if args.command == "tied":
        return tied(args)
    if args.command == "frozen":
        return frozen(args)
    if args.command == "bf16":
        return bf16(args)
    if args.command == "reshape":
        model = onnx.load(args.original)
        tensor = next(t for t in model.graph.initializer if t.name == args.name)
        tensor.dims[:] = [tensor.dims[1], tensor.dims[0]]
        onnx.save(model, args.out)
        print(f"ok reshape: {args.name} {list(tensor.dims)}")
        return 0
    return same(args) if args.command == "same" else loss(args)


if __name__ == "__main__":
    sys.exit(main())
