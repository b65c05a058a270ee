"""Picks an EOS id that makes some rows finish early and others run on.

Reads the oracle's greedy tokens without EOS (reference.py --tokens-output,
int64 [rows, M]) and prints the first id that every row of --early emits
within its first --within tokens and no row of --late emits at all: with it
as --eos, the early rows stop after a few steps while the late rows run to
M (data-parallel generation's ragged finish, docs/generation.md section 8).
Exits 1, saying so, when the fixture offers no such id.
"""
import argparse
import sys

import numpy as np


def rows(text):
    return [int(v) for v in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tokens")
    parser.add_argument("--early", type=rows, required=True, help="comma-separated rows")
    parser.add_argument("--late", type=rows, required=True, help="comma-separated rows")
    parser.add_argument("--within", type=int, default=3)
    args = parser.parse_args()
    tokens = np.load(args.tokens)
    late = set(int(t) for row in args.late for t in tokens[row])
    candidates = None
    for row in args.early:
        found = [int(t) for t in tokens[row, :args.within]]
        candidates = found if candidates is None else [t for t in candidates if t in found]
    for token in candidates or []:
        if token not in late:
            print(token)
            return 0
    print(f"no id is in the first {args.within} tokens of rows {args.early} and in no "
          f"token of rows {args.late}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
