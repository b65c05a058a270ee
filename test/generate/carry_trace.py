"""What a `zrun generate --trace` file says about cross-step prefetch.

docs/generation.md section 6: prefill and each decode end with a carry_gather
of the group the next decode reads first, so that the gather overlaps the
tail of the program that issues it instead of stalling the next decode at
its start. For every rank and every decode run this reads:

- whether the run has a carry_gather (comm queue) that starts before the
  run's last compute event ends: it overlaps the run's own compute;
- how long the run stood still at its start before its first kernel began
  (from its first event, a gather or carry_wait, to its first compute
  kernel): the gather exposed at decode start. On a CPU where the comm
  thread's collective keeps the compute thread off the cores, this shows as
  a late first kernel rather than as a long wait event, so the span is
  measured, not the wait;
- how long the run stood still at its end after its last compute event
  (the run ends when its comm queue has drained: a carry_gather that the
  compute did not cover shows here).

Prints, for the lit tests and the measurements:

  decode runs: N (per rank)
  carry_gather overlapping its decode's compute: K of N
  decode start stall: mean A us, median B us; end stall: mean C us, median D us (rank 0)
"""
import collections
import json
import statistics
import sys

# Compute-queue events that run no kernel.
BOOKKEEPING = {"gather_wait", "carry_wait", "carry_drain", "release", "resident_release"}


def main():
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    runs = collections.defaultdict(list)  # (rank, run) -> decode events
    for event in trace["traceEvents"]:
        if event.get("ph") == "X" and event["args"].get("program") == "decode":
            runs[(event["pid"], event["args"]["run"])].append(event)
    ranks = sorted({rank for rank, _ in runs})
    overlapping = 0
    start_stalls, end_stalls = [], []
    for (rank, run), events in sorted(runs.items()):
        compute = [e for e in events if e["tid"] == 0]
        last_compute_end = max(e["ts"] + e["dur"] for e in compute)
        if any(
            e["name"] == "carry_gather" and e["ts"] < last_compute_end
            for e in events
        ):
            overlapping += 1
        kernels = [e for e in compute if e["name"] not in BOOKKEEPING]
        if rank == 0 and kernels:
            first_event = min(e["ts"] for e in events)
            start_stalls.append(min(e["ts"] for e in kernels) - first_event)
            end_stalls.append(max(e["ts"] + e["dur"] for e in events) - last_compute_end)
    count = len(runs) // max(len(ranks), 1)
    print(f"decode runs: {count} (per rank)")
    print(f"carry_gather overlapping its decode's compute: {overlapping} of {len(runs)}")
    if start_stalls:
        print(
            f"decode start stall: mean {statistics.mean(start_stalls):.1f} us, "
            f"median {statistics.median(start_stalls):.1f} us; end stall: mean "
            f"{statistics.mean(end_stalls):.1f} us, median "
            f"{statistics.median(end_stalls):.1f} us (rank 0)"
        )

if __name__ == "__main__":
    main()
