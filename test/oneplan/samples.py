"""The tokens `zrun train --generate-every` printed, against an oracle's.

zrun prints each generation as a header line, "zrun: generated after
micro-step M (...): B rows x T tokens; ...", followed by one line per row,
"zrun:   row R: t0 t1 ...". This reads the generation after micro-step M
from zrun's output and compares it with the oracle's tokens (int64 [B, T],
test/generate/reference.py --tokens-output), printing one line: "ok ..." or
"FAIL ..." (exit status 1).
"""

import argparse
import re
import sys

import numpy as np

HEADER = re.compile(r"^zrun: generated after micro-step (\d+) ")
ROW = re.compile(r"^zrun:   row (\d+):((?: \d+)*)$")


def read_generation(path, micro_step):
    rows = None
    with open(path) as file:
        for line in file:
            line = line.rstrip("\n")
            header = HEADER.match(line)
            if header:
                rows = [] if int(header.group(1)) == micro_step else None
                if rows is None and micro_step < int(header.group(1)):
                    break
                continue
            row = ROW.match(line)
            if row and rows is not None:
                rows.append([int(t) for t in row.group(2).split()])
            elif rows:
                break
    if not rows:
        sys.exit(f"FAIL {path}: no generation after micro-step {micro_step}")
    return np.array(rows, dtype=np.int64)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output", help="zrun train's stdout")
    parser.add_argument("--micro-step", type=int, required=True)
    parser.add_argument("--compare", required=True, help="the oracle's tokens")
    args = parser.parse_args()
    tokens = read_generation(args.output, args.micro_step)
    oracle = np.load(args.compare)
    if tokens.shape != oracle.shape:
        print(f"FAIL tokens are {list(tokens.shape)}, the oracle's "
              f"{list(oracle.shape)}")
        return 1
    differ = np.argwhere(tokens != oracle)
    if len(differ):
        row, step = differ[0]
        print(f"FAIL tokens: {len(differ)} differ; first at row {row}, step "
              f"{step}: {tokens[row, step]}, the oracle {oracle[row, step]}")
        return 1
    print(f"ok tokens identical ({tokens.shape[0]} rows x {tokens.shape[1]} "
          f"tokens; {len(np.unique(tokens))} distinct ids)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
