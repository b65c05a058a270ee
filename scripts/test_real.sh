#!/usr/bin/env bash
# Runs the real-exporter fixture tests (test/real/, lit) against build/, with
# test/real/expected-failures.txt ignored (ZPLAN_REAL_STRICT=1), and prints one
# line per test: PASS or FAIL and its first FAIL line. Extra arguments go to
# lit (e.g. --filter 'llama-tied'). Builds zcc and zrun first if needed.
#
#   scripts/test_real.sh                     # every family, export and check
#   scripts/test_real.sh --filter gemma      # one family
#   ZPLAN_REAL_STRICT=0 scripts/test_real.sh # honour expected-failures.txt (as ctest does)
#   scripts/test_real.sh --update-expected   # rewrite test/real/expected-failures.txt
#                                            # from this run's failures
set -uo pipefail
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update-expected" ]; then
  update=1
  shift
  [ $# -eq 0 ] || { echo "test_real: --update-expected runs every test; no other arguments" >&2; exit 2; }
fi
build=${ZPLAN_BUILD_DIR:-build}
lit=$(sed -n 's/^LLVM_EXTERNAL_LIT:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$lit" ] || lit=/usr/lib/llvm-19/build/utils/lit/lit.py
ninja -C "$build" zcc zrun >/dev/null || exit 1
export ZPLAN_REAL_STRICT=${ZPLAN_REAL_STRICT:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
mkdir -p "$build/test/real"
python3 "$lit" -v "$build/test/real" --xunit-xml-output "$out/real.xml" "$@" > "$out/lit.txt" 2>&1
status=$?
[ "$update" = 0 ] || ZPLAN_REAL_STRICT=1
python3 - "$out/real.xml" "$update" test/real/expected-failures.txt <<'PY'
import sys, xml.etree.ElementTree as ET
rows = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = case.get("classname", "").split(".", 1)[-1] + "/" + case.get("name", "")
    name = name.split("real/", 1)[-1] if "real/" in name else name
    failure = case.find("failure")
    skipped = case.find("skipped")
    if failure is None:
        state, why = ("SKIP", "") if skipped is not None else ("PASS", "")
    else:
        text = failure.text or ""
        why = next((l for l in text.splitlines() if l.startswith("FAIL ")), "")
        state = "XPASS" if "passes: remove" in text else "FAIL"
        if not why:
            why = next((l for l in reversed(text.splitlines()) if l.strip()), "")
    rows.append((name, state, why, float(case.get("time", 0))))
for name, state, why, t in sorted(rows):
    print(f"{state:5s} {name:38s} {t:6.1f}s  {why[:240]}")
counts = {}
for _, state, _, _ in rows:
    counts[state] = counts.get(state, 0) + 1
print("; ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def expected_text(line):
    """The part of a FAIL line that names the failure, without the run's
    configuration or numbers that move with unrelated changes."""
    msg = line.split(": ", 1)[1] if ": " in line else line
    if "zcc: error:" in msg:
        return msg[msg.index("zcc: error:"):].split(" [...]")[0][:140]
    if "zrun: error:" in msg:
        return msg[msg.index("zrun: error:"):][:140]
    if msg.startswith("gradient of ") and ": max |" in msg:
        return msg.split(": max |")[0]
    if msg.startswith("step ") and " loss " in msg:
        return " ".join(msg.split()[:3])
    if "are those of HF training with the tie broken" in msg:
        return "are those of HF training with the tie broken"
    if msg.startswith("tokens "):
        return ", HF generate"
    if msg.startswith("gradients for ") or msg.startswith("no gradient for "):
        return msg.split(":")[0]
    return msg[:140]


if sys.argv[2] == "1":
    with open(sys.argv[3], "w") as f:
        f.write("# Real-fixture tests that fail today (scripts/test_real.sh --update-expected):\n"
                "# NAME<TAB>a piece of its first FAIL line. test/real/lit.local.cfg makes such a\n"
                "# test XFAIL when it fails with that line, FAIL otherwise, XPASS when it passes.\n")
        for name, state, why, _ in sorted(rows):
            if state == "FAIL":
                f.write(f"{name}\t{expected_text(why)}\n")
    print(f"wrote {sys.argv[3]}")
PY
echo "test_real: $(( $(date +%s) - start )) s wall; lit exit status $status"
exit $status
