"""Exits 1 unless two token files (.npy, int [B, M]) hold the same ids.

Prints "ok tokens identical (B rows x M tokens)", or the first row and
step that differ.
"""
import sys

import numpy as np


def main():
    first, second = (np.load(path) for path in sys.argv[1:3])
    if first.shape != second.shape:
        sys.exit(f"shapes differ: {first.shape} vs {second.shape}")
    different = np.argwhere(first != second)
    if len(different):
        row, step = different[0]
        sys.exit(f"row {row} step {step}: {first[row, step]} vs {second[row, step]}")
    print(f"ok tokens identical ({first.shape[0]} rows x {first.shape[1]} tokens)")


if __name__ == "__main__":
    main()
