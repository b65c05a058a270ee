#!/usr/bin/env python3
"""Compares what zrun wrote on two backends (scripts/device_check.sh).

  compare_backends.py arrays REF.npy OTHER.npy --tolerance T
      max |a - b| / max(1, max |a|) over the arrays; ok when <= T and the
      shapes and dtypes agree (integer arrays must be equal).
  compare_backends.py losses REF.tsv OTHER.tsv --tolerance T
      the loss logs of zrun train: same steps, each loss within T relative.

Prints one line, `ok ...` or `FAIL ...`, and exits 0 or 1.
"""
import argparse
import sys

import numpy as np


def compare_arrays(reference, other, tolerance):
    a, b = np.load(reference), np.load(other)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if not np.issubdtype(a.dtype, np.floating):
        differing = int(np.count_nonzero(a != b))
        return differing == 0, f"{differing} of {a.size} elements differ"
    if np.isnan(a).any() or np.isnan(b).any():
        return False, f"NaN: {int(np.isnan(a).sum())} vs {int(np.isnan(b).sum())}"
    scale = max(1.0, float(np.abs(a).max(initial=0.0)))
    error = float(np.abs(a.astype(np.float64) - b).max(initial=0.0)) / scale
    return error <= tolerance, f"max relative difference {error:.3e} (tolerance {tolerance:g})"


def read_losses(path):
    losses = {}
    with open(path) as file:
        for line in file:
            fields = line.split()
            if len(fields) >= 2 and fields[0].isdigit():
                losses[int(fields[0])] = float(fields[1])
    return losses


def compare_losses(reference, other, tolerance):
    a, b = read_losses(reference), read_losses(other)
    if not a or sorted(a) != sorted(b):
        return False, f"steps {sorted(a)} vs {sorted(b)}"
    worst = max(abs(a[s] - b[s]) / max(1e-6, abs(a[s])) for s in a)
    return worst <= tolerance, (f"{len(a)} steps, max relative difference "
                                f"{worst:.3e} (tolerance {tolerance:g})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["arrays", "losses"])
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--tolerance", type=float, required=True)
    args = parser.parse_args()
    compare = compare_arrays if args.kind == "arrays" else compare_losses
    try:
        ok, text = compare(args.reference, args.other, args.tolerance)
    except (OSError, ValueError) as error:
        ok, text = False, str(error)
    print(("ok " if ok else "FAIL ") + text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
