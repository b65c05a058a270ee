"""Prints facts about a zrun --trace file, one a line, for FileCheck.

    trace_facts.py TRACE.json

The file must parse as JSON (json.load fails otherwise). Times are read as
exact decimals, so that "one event ends before the next starts" is compared
to the nanosecond the trace holds, not after float rounding.
"""
import collections
import decimal
import json
import sys


def main():
    with open(sys.argv[1]) as file:
        trace = json.load(file, parse_float=decimal.Decimal)
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    metadata = [e for e in events if e["ph"] == "M"]
    print(f"events: {len(complete)} complete, {len(metadata)} metadata, "
          f"{len(events) - len(complete) - len(metadata)} other")

    ranks = sorted({e["pid"] for e in complete})
    print("ranks:", " ".join(map(str, ranks)))
    for rank in ranks:
        queues = sorted({e["tid"] for e in complete if e["pid"] == rank})
        names = {e["tid"]: e["args"]["name"] for e in metadata
                 if e["pid"] == rank and e["name"] == "thread_name"}
        process = [e["args"]["name"] for e in metadata
                   if e["pid"] == rank and e["name"] == "process_name"]
        print(f"rank {rank}: process {process}, queues "
              + ", ".join(f"{tid} ({names.get(tid, '?')})" for tid in queues))

    ops_by_queue = collections.defaultdict(set)
    for event in complete:
        ops_by_queue[event["tid"]].add(event["name"])
    for tid in sorted(ops_by_queue):
        print(f"queue {tid} ops: {' '.join(sorted(ops_by_queue[tid]))}")
    gathers = [e for e in complete if e["name"] == "all_gather"]
    print(f"all_gather: {len(gathers)} events, on queues "
          f"{sorted({e['tid'] for e in gathers})}, "
          f"{sum('group' not in e['args'] for e in gathers)} without a group")

    # Per rank and run: how many events on each queue, and whether the
    # instructions seen are 0..N-1, each exactly once.
    by_rank_run = collections.defaultdict(list)
    for event in complete:
        by_rank_run[(event["pid"], event["args"]["run"])].append(event)
    for (rank, run), group in sorted(by_rank_run.items()):
        indices = sorted(e["args"]["instruction"] for e in group)
        each_once = indices == list(range(len(indices)))
        counts = collections.Counter(e["tid"] for e in group)
        print(f"rank {rank} run {run}: {counts[0]} compute, {counts[1]} comm, "
              f"instructions 0 to {indices[-1]} "
              f"{'each once' if each_once else 'NOT each once'}")

    # A queue runs one instruction at a time, in order.
    overlaps = 0
    for rank in ranks:
        for tid in (0, 1):
            # In file order, which is the order the queue ran them in.
            queue = [e for e in complete
                     if e["pid"] == rank and e["tid"] == tid]
            for before, after in zip(queue, queue[1:]):
                if before["ts"] + before["dur"] > after["ts"]:
                    overlaps += 1
    print(f"overlapping events on one queue: {overlaps}")

    # The plan is rank-independent: every rank runs the same collectives.
    sequences = {tuple((e["args"]["run"], e["args"]["instruction"],
                        e["args"].get("group"))
                       for e in gathers if e["pid"] == rank)
                 for rank in ranks}
    print(f"all_gather sequences across ranks: {len(sequences)} distinct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
