"""Random numpy arguments into the zplan module: every one is converted or
refused with RuntimeError naming the argument, never a crash.

    mpirun -np N python argument_fuzz.py TRAIN_PLAN GENERATE_PLAN [--cases C] [--seed S]

Each case draws a dtype (every numpy kind: bool, signed and unsigned ints of
every width, float16/32/64, complex, str, bytes, object, datetime), a shape
(rank 0 to 4; half the time the plan's own shape), a layout (C order,
Fortran order, a strided view, a read-only array, a non-native byte order)
and values (in range, or extreme for the dtype), and passes the array as
train_step's input_ids or labels, or generate's prompts or prompt_lengths.
All ranks draw the same case (one seed), so every rank raises or none does.
Prints `ok C cases: A accepted, R refused (RuntimeError)`; a crash fails
the job (mpirun reports the signal).
"""
import argparse
import sys

import numpy as np

import zplan

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "U3", "S3", "object", "datetime64[s]"]


def draw_array(rng, shape):
    dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
    if rng.random() < 0.5:
        shape = tuple(int(d) for d in rng.integers(0, 5, size=rng.integers(0, 5)))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = (0, min(200, info.max)) if rng.random() < 0.7 else (info.min, info.max)
        values = rng.integers(low, high, size=shape, dtype=dtype, endpoint=True)
    elif dtype.kind == "b":
        values = rng.random(size=shape) < 0.5
    elif dtype.kind in "fc":
        values = (rng.random(size=shape) * 300).astype(dtype)
    elif dtype.kind in "US":
        values = np.full(shape, "7", dtype=dtype)
    elif dtype.kind == "M":
        values = np.zeros(shape, dtype=dtype)
    else:
        values = np.full(shape, 7, dtype=object)
    layout = rng.integers(5)
    if layout == 1 and values.ndim >= 2:
        values = np.asfortranarray(values)
    elif layout == 2 and values.ndim >= 1 and values.shape[-1] > 0:
        values = np.repeat(values, 2, axis=-1)[..., ::2]
    elif layout == 3:
        values = values.copy()
        values.setflags(write=False)
    elif layout == 4 and values.dtype.kind in "iuf" and values.dtype.itemsize > 1:
        values = values.astype(values.dtype.newbyteorder())
    return values


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("train_plan")
    parser.add_argument("generate_plan")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    trainer = zplan.Session(args.train_plan, lr=1e-3)
    generator = zplan.Session(args.generate_plan)
    rows, columns = trainer.train_input_shape
    batch = generator.generation_shape["batch"]
    good_ids = np.arange(rows * columns).reshape(rows, columns) % 200
    good_prompts = np.full((batch, 4), 5)
    accepted = refused = 0
    for case in range(args.cases):
        target = rng.integers(4)
        shape = [(rows, columns), (rows, columns), (batch, 4), (batch,)][target]
        array = draw_array(rng, shape)
        calls = [lambda: trainer.train_step(array),
                 lambda: trainer.train_step(good_ids, array),
                 lambda: generator.generate(array, max_new_tokens=2),
                 lambda: generator.generate(good_prompts, array, max_new_tokens=2)]
        try:
            calls[target]()
            accepted += 1
        except RuntimeError as error:
            refused += 1
            if not str(error):
                sys.exit(f"case {case}: a RuntimeError without a message")
    if zplan.rank() == 0:
        print(f"ok {args.cases} cases: {accepted} accepted, {refused} refused (RuntimeError)")


if __name__ == "__main__":
    main()
