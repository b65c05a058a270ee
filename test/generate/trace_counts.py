"""Counts the events of a `zrun generate --trace` file per program and op.

Prints one line per (program, op) of rank 0's events, sorted,
`PROGRAM OP COUNT`, for the lit tests to check what each program ran (for
instance that decode gathers nothing when every group is resident). Only
the collectives and the bookkeeping around them are listed: all_gather,
gather_wait, release, resident_gather, resident_release.
"""
import collections
import json
import sys

SHOWN = {"all_gather", "gather_wait", "release", "resident_gather", "resident_release"}


def main():
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    counts = collections.Counter()
    for event in trace["traceEvents"]:
        if event.get("ph") == "X" and event.get("pid") == 0 and event["name"] in SHOWN:
            counts[(event["args"]["program"], event["name"])] += 1
    for (program, op), count in sorted(counts.items()):
        print(program, op, count)


if __name__ == "__main__":
    main()
