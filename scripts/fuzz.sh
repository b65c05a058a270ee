#!/usr/bin/env bash
# Builds and runs zplan's libFuzzer harnesses (fuzz/README.md). The sanitized
# build lives in build-fuzz/, configured with clang-19; the normal build in
# build/ (GCC) is untouched and only lends its zcc to compile seed plans.
#
#   scripts/fuzz.sh build            configure build-fuzz/ once, build the harnesses
#   scripts/fuzz.sh seeds            make the seed corpora under build-fuzz/seeds/
#   scripts/fuzz.sh ci [SECONDS]     build, seeds, replay the seeds (must be clean),
#                                    then fuzz each harness SECONDS (60); a new crash
#                                    fails (one of an unfixed fuzz/crashes/ input does not)
#   scripts/fuzz.sh long [SECONDS]   fuzz each harness SECONDS (600) in fork mode,
#                                    keeping going after crashes; corpus kept in
#                                    build-fuzz/corpus/
#   scripts/fuzz.sh replay           run every reproducer in fuzz/crashes/<harness>/;
#                                    fails while any of them still crashes
#   scripts/fuzz.sh zcc              build a sanitized zcc in build-fuzz/ and compile
#                                    every fixture with it (N = 1, 2, 4; all dumps);
#                                    fails on any sanitizer report
#
# Environment: ZPLAN_JOBS (build parallelism, 2), FUZZ_HARNESSES (default
# "importer plan npy arrays"), FUZZ_JOBS (long: parallel fuzzing jobs, 1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-fuzz
harnesses=(${FUZZ_HARNESSES:-importer plan npy arrays})

# Why each option is needed is in fuzz/README.md ("Sanitizer options"). The
# harnesses' own libraries are instrumented; MLIR, LLVM, protobuf and libstdc++
# are not.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-19/bin/llvm-symbolizer}
# The importer harness links the fixture's external data next to the models
# it writes, so the external-data seed is imported in full.
export ZPLAN_FUZZ_MODEL_DIR=$root/test/models

# Per-input time limits (seconds): a fixture import under ASan takes well
# under a second; anything near these limits is a hang worth reporting.
declare -A input_timeout=([importer]=20 [plan]=10 [npy]=5 [arrays]=5)

die() { echo "fuzz: error: $*" >&2; exit 1; }

cmd_build() {
  command -v clang++-19 >/dev/null ||
    die "clang++-19 not found; run scripts/setup.sh (clang-19, libclang-rt-19-dev)"
  if [ ! -f "$build/build.ninja" ]; then
    # -O1 and frame pointers: fast enough to fuzz, stacks that symbolize.
    # NDEBUG as in the system MLIR, whose headers must match its libraries.
    local flags="-fsanitize=fuzzer-no-link,address,undefined"
    flags+=" -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    flags+=" -gline-tables-only -O1 -DNDEBUG"
    # -Werror is the main build's (g++, every target); clang's warnings
    # here inform without failing the fuzzing.
    cmake -G Ninja -B "$build" \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
      -DCMAKE_BUILD_TYPE=None \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DZPLAN_FUZZ=ON -DZPLAN_ENABLE_TESTS=OFF -DZPLAN_ENABLE_CUDA=OFF \
      -DZPLAN_WERROR=OFF -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir
  fi
  ninja -C "$build" -j "${ZPLAN_JOBS:-2}" fuzzers
  # A harness CMake could not build (arrays without Python's embedding
  # library: fuzz/CMakeLists.txt warns) is left out, saying so.
  local built=() harness
  for harness in "${harnesses[@]}"; do
    if [ -x "$build/bin/zplan-fuzz-$harness" ]; then
      built+=("$harness")
    else
      echo "fuzz: $harness: not built (see CMake's warning in build-fuzz/), skipped"
    fi
  done
  harnesses=("${built[@]}")
}

# The --input-shape arguments of a fixture: input_ids=2x16, or for a cache
# export one decode step after a past of 7 (the past inputs' 'batch' and
# 'past_sequence' bind through past_key_values.0.key; Llama has 2 KV heads).
fixture_shapes() {
  case $(basename "$1") in
    *-kv-*)
      local heads=4
      case $(basename "$1") in llama-*) heads=2 ;; esac
      echo "--input-shape input_ids=2x1 --input-shape attention_mask=2x8" \
           "--input-shape position_ids=2x1 --input-shape past_key_values.0.key=2x${heads}x7x16" ;;
    *) echo "--input-shape input_ids=2x16" ;;
  esac
}

# Plans compiled by the normal build's zcc from every fixture at N = 1, 2, 4
# (persistence threshold 0, so that the tiny parameters are sharded).
make_plan_seeds() {
  local out=$1 zcc=$root/build/bin/zcc
  if [ ! -x "$zcc" ]; then
    echo "fuzz: build/bin/zcc not found: the plan harness starts without compiled" \
         "plans (run scripts/build.sh first for them)"
    return
  fi
  local scratch count=0
  scratch=$(mktemp -d)
  # Inference plans, and training plans (three programs, STATE buffers,
  # gradient reduce-scatters, optimizer updates).
  for model in "$root"/test/models/*.onnx; do
    for n in 1 2 4; do
      for mode in infer train; do
        local name
        name=$(basename "$model" .onnx)-$mode-n$n.zplan
        # shellcheck disable=SC2046 # the shapes are words
        if "$zcc" "$model" $(fixture_shapes "$model") --world-size "$n" --mode "$mode" \
             --persistence-threshold 0 -o "$scratch/$name" 2>"$scratch/zcc.err"; then
          cp "$scratch/$name" "$out/$name"
          count=$((count + 1))
        else
          echo "fuzz: zcc --mode $mode failed on $model at N=$n: $(head -1 "$scratch/zcc.err")"
        fi
      done
    done
  done
  rm -rf "$scratch"
  echo "seeds: $count plans compiled by build/bin/zcc"
}

cmd_seeds() {
  local seeds=$build/seeds
  rm -rf "$seeds"
  mkdir -p "$seeds"/{importer,plan,npy,arrays}
  cp "$root"/test/models/*.onnx "$seeds/importer/"
  python3 "$root/fuzz/make_seeds.py" "$seeds"
  make_plan_seeds "$seeds/plan"
  # A plan with no valid seed still gets one input to start from.
  [ -n "$(ls -A "$seeds/plan")" ] || printf '\x08\x01' >"$seeds/plan/version-only"
}

# Prints the lines of a libFuzzer log that say what crashed and where.
show_crash() {
  local log=$1
  grep -m1 -E 'Test unit written to|^artifact_prefix' "$log" || true
  # The report: from the sanitizer's or libFuzzer's first line, the stack.
  sed -n -E '/^==[0-9]+==ERROR|runtime error:|deadly signal|ERROR: libFuzzer|zplan-fuzz-[a-z]+:/,$p' "$log" |
    grep -v -E '^(MS:|base64:|0x)' | head -60
}

# Runs every file under the given directories once through harness $1;
# fails on the first report. Prints how many inputs ran.
replay_files() {
  local harness=$1 log=$2
  shift 2
  local files=()
  local dir
  for dir in "$@"; do
    [ -d "$dir" ] || continue
    while IFS= read -r -d '' file; do files+=("$file"); done \
      < <(find "$dir" -type f ! -name 'README*' ! -name '.*' -print0 | sort -z)
  done
  if [ ${#files[@]} -eq 0 ]; then
    echo "0"
    return 0
  fi
  "$build/bin/zplan-fuzz-$harness" -timeout="${input_timeout[$harness]}" \
    "${files[@]}" >"$log" 2>&1 || return 1
  echo "${#files[@]}"
}

# The value of libFuzzer's final `stat::NAME:` line in a log.
stat_of() {
  local value
  value=$(sed -n -E "s/^stat::$2: *([0-9]+).*/\1/p" "$1" | tail -1)
  echo "${value:-0}"
}

# A crash's signature: the first stack frame in zplan's own sources (not the
# harness), as path:line, or else the sanitizer's SUMMARY line. Two inputs
# with one signature are taken for one bug.
signature_of_log() {
  local frame
  frame=$(sed -n -E "s#^ *\#[0-9]+ 0x[0-9a-f]+ in .* $root/([^ :]+:[0-9]+)(:[0-9]+)?\$#\1#p" "$1" |
          grep -v -E '^(fuzz|build-fuzz)/' | head -1)
  if [ -n "$frame" ]; then echo "$frame"; return; fi
  grep -m1 -E '^SUMMARY:|^zplan-fuzz-[a-z]+:' "$1" || echo "unknown"
}

# Replays one input through harness $1; prints its signature if it crashes,
# nothing if it runs clean. The log is left in $3.
signature_of_input() {
  local harness=$1 input=$2 log=$3
  if ! "$build/bin/zplan-fuzz-$harness" -timeout="${input_timeout[$harness]}" \
         "$input" >"$log" 2>&1; then
    signature_of_log "$log"
  fi
}

# The signatures of fuzz/crashes/$1/* that still crash, one per line.
known_signatures() {
  local harness=$1 dir=$root/fuzz/crashes/$1
  [ -d "$dir" ] || return 0
  while IFS= read -r -d '' file; do
    signature_of_input "$harness" "$file" "$build/logs/known.log"
  done < <(find "$dir" -type f ! -name 'README*' ! -name '.*' -print0 | sort -z)
}

cmd_ci() {
  local seconds=${1:-60}
  local start=$SECONDS
  cmd_build
  cmd_seeds
  local logs=$build/logs artifacts=$build/artifacts failed=0
  rm -rf "$logs" "$artifacts"
  mkdir -p "$logs"
  echo "fuzz: build and seeds took $((SECONDS - start)) s"
  # Every filed reproducer is a regression input: a bug fixed once stays
  # fixed, and a reproducer committed before its fix fails CI.
  cmd_replay || failed=1
  for harness in "${harnesses[@]}"; do
    # Clean on valid inputs first: every seed once, no mutation.
    local count
    if ! count=$(replay_files "$harness" "$logs/$harness-seeds.log" "$build/seeds/$harness"); then
      echo "fuzz: $harness: a seed input fails (not a fuzzing find: the harness" \
           "or the sanitizer options are wrong on valid input):"
      show_crash "$logs/$harness-seeds.log"
      failed=1
      continue
    fi
    echo "fuzz: $harness: $count seed inputs, no report"
    # Bugs already filed as reproducers (until they are fixed) do not fail
    # CI when the fuzzer finds them again; the run goes on for the rest of
    # its time. `scripts/fuzz.sh replay` is the check that they are fixed.
    local known
    known=$(known_signatures "$harness" | sort -u)
    [ -z "$known" ] || echo "fuzz: $harness: known, unfixed (fuzz/crashes/$harness):" \
                          "$(tr '\n' ' ' <<<"$known")"
    local corpus
    corpus=$(mktemp -d)
    mkdir -p "$artifacts/$harness"
    local executions=0 crashes=0 known_hits=0 round=0 deadline=$((SECONDS + seconds))
    while [ $((deadline - SECONDS)) -gt 0 ]; do
      round=$((round + 1))
      local log=$logs/$harness-$round.log status=0
      "$build/bin/zplan-fuzz-$harness" -max_total_time=$((deadline - SECONDS)) \
        -timeout="${input_timeout[$harness]}" -print_final_stats=1 \
        -artifact_prefix="$artifacts/$harness/" \
        "$corpus" "$build/seeds/$harness" >"$log" 2>&1 || status=$?
      executions=$((executions + $(stat_of "$log" number_of_executed_units)))
      [ "$status" -ne 0 ] || break
      crashes=$((crashes + 1))
      local signature
      signature=$(signature_of_log "$log")
      if [ -n "$known" ] && grep -qxF "$signature" <<<"$known"; then
        known_hits=$((known_hits + 1))
        continue
      fi
      echo "fuzz: $harness: new crash at $signature; reproducer and report (log: $log):"
      show_crash "$log"
      failed=1
      break
    done
    rm -rf "$corpus"
    echo "fuzz: $harness: $executions executions in ${seconds} s, $crashes crashes" \
         "($known_hits of a known, unfixed bug)"
  done
  echo "fuzz: ci took $((SECONDS - start)) s"
  return $failed
}

cmd_long() {
  local seconds=${1:-600}
  cmd_build
  [ -d "$build/seeds" ] || cmd_seeds
  local logs=$build/logs-long
  mkdir -p "$logs"
  printf '%-9s %12s %8s %8s %8s\n' harness executions exec/s corpus crashes
  for harness in "${harnesses[@]}"; do
    local corpus=$build/corpus/$harness artifacts=$build/artifacts-long/$harness
    mkdir -p "$corpus" "$artifacts"
    # Fork mode: a crash, timeout or OOM ends one child, not the run.
    "$build/bin/zplan-fuzz-$harness" -fork="${FUZZ_JOBS:-1}" -ignore_crashes=1 \
      -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
      -timeout="${input_timeout[$harness]}" -artifact_prefix="$artifacts/" \
      "$corpus" "$build/seeds/$harness" >"$logs/$harness.log" 2>&1 || true
    # Fork mode's progress lines: "#N: cov: .. corp: C exec/s: E
    # oom/timeout/crash: o/t/c time: Ts job: J".
    local last executions rate corp crashes
    last=$(grep -E '^#[0-9]+: cov:' "$logs/$harness.log" | tail -1)
    executions=$(sed -n -E 's/^#([0-9]+):.*/\1/p' <<<"$last")
    rate=$(sed -n -E 's/.* exec\/s: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -n -E 's/.* corp: ([0-9]+).*/\1/p' <<<"$last")
    crashes=$(sed -n -E 's/.*oom\/timeout\/crash: ([0-9]+\/[0-9]+\/[0-9]+).*/\1/p' <<<"$last")
    printf '%-9s %12s %8s %8s %8s\n' "$harness" "${executions:-?}" "${rate:-?}" \
      "${corp:-?}" "${crashes:-?}"
    echo "          (oom/timeout/crash; artifacts: $artifacts, log: $logs/$harness.log)"
  done
}

cmd_replay() {
  cmd_build
  local logs=$build/logs-replay failed=0
  mkdir -p "$logs"
  for harness in "${harnesses[@]}"; do
    local dir=$root/fuzz/crashes/$harness
    [ -d "$dir" ] || continue
    while IFS= read -r -d '' file; do
      local name=${file#"$root"/}
      if "$build/bin/zplan-fuzz-$harness" -timeout="${input_timeout[$harness]}" \
           "$file" >"$logs/replay.log" 2>&1; then
        echo "fuzz: replay: $name: fixed"
      else
        echo "fuzz: replay: $name: still fails:"
        show_crash "$logs/replay.log" | sed 's/^/    /'
        failed=1
      fi
    done < <(find "$dir" -type f ! -name 'README*' ! -name '.*' -print0 | sort -z)
  done
  return $failed
}

# The whole compiler under the sanitizers, on valid models: what the
# sanitizer options must keep quiet (fuzz/README.md).
cmd_zcc() {
  command -v clang++-19 >/dev/null || die "clang++-19 not found; run scripts/setup.sh"
  [ -f "$build/build.ninja" ] || cmd_build
  ninja -C "$build" -j "${ZPLAN_JOBS:-2}" zcc
  local scratch failed=0
  scratch=$(mktemp -d)
  for model in "$root"/test/models/*.onnx; do
    for n in 1 2 4; do
      local name
      name=$(basename "$model" .onnx)-n$n
      # shellcheck disable=SC2046 # the shapes are words
      if "$build/bin/zcc" "$model" $(fixture_shapes "$model") --world-size "$n" \
           --persistence-threshold 0 --dump ir,schedule,memory,report \
           --dump-dir "$scratch/$name" -o "$scratch/$name.zplan" \
           >"$scratch/$name.log" 2>&1; then
        echo "fuzz: sanitized zcc: $name: clean"
      else
        echo "fuzz: sanitized zcc: $name: failed:"
        show_crash "$scratch/$name.log" | sed 's/^/    /'
        failed=1
      fi
    done
  done
  rm -rf "$scratch"
  return $failed
}

case "${1:-}" in
  build) cmd_build ;;
  seeds) cmd_seeds ;;
  ci) cmd_ci "${2:-60}" ;;
  long) cmd_long "${2:-600}" ;;
  replay) cmd_replay ;;
  zcc) cmd_zcc ;;
  *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
