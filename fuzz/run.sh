#!/usr/bin/env bash
# Builds the libFuzzer targets with SwiftPM (Package.swift's `fuzzTargets`, into .build/fuzz) and
# runs each: first its committed corpus (fuzz/corpus/<target>), every file once and whole, then
# SECONDS of fuzzing on a copy of that corpus (the committed one never changes; new inputs are
# thrown away). Targets run FUZZ_JOBS at a time (default: one per core).
# Exits non-zero when any target crashes, leaks, times out or runs out of memory, and prints the
# saved input and a reproducer command for it.
# Usage: fuzz/run.sh [SECONDS] [TARGET…]      e.g. fuzz/run.sh 10 git json; 0 = replay only
#   make fuzz        = fuzz/run.sh            (60 s per target, or $FUZZ_SECONDS)
#   make fuzz-smoke  = fuzz/run.sh 10         (what CI runs)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-${FUZZ_SECONDS:-60}}
shift || true
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
export PATH="/opt/swift/usr/bin:$PATH"
export SWIFT_BACKTRACE=enable=no   # a crash otherwise hangs in the Swift backtracer
SCRATCH=$ROOT/.build/fuzz
BIN=$SCRATCH/release

# Largest input per target: what the parser would ever be given, plus some slack.
max_len() {
    case "$1" in
        age) echo 66000 ;;            # one full 64 KiB payload chunk and a header
        git|docker|token_import|token_document|json|jwt|issuer) echo 4096 ;;
        hosts|clock|base64|config) echo 512 ;;
        loopback) echo 16500 ;;       # LoopbackListener.maxHeaderBytes (16 KiB) and a little more
        pasteback) echo 8192 ;;       # PasteBackFlow.maxLine
        broker_request) echo 9000 ;;  # BrokerProtocol.maxHeadBytes (8 KiB) and a little more
        *) echo 4096 ;;
    esac
}

if [ $# -gt 0 ]; then TARGETS=("$@"); else
    TARGETS=(); for d in "$ROOT"/fuzz/targets/*/; do TARGETS+=("$(basename "$d")"); done
fi

# Optimized (2.5-5x the executions of a debug build per second) and with -enable-testing, so
# targets `@testable import` the internals they fuzz, as the unit tests do.
# `-Xswiftc -sanitize=fuzzer,address` because swiftc keeps only the last of several -sanitize=
# flags: SwiftPM's separate `-sanitize=fuzzer -sanitize=address` alone compiles Swift code with
# ASan but without coverage (clang adds both up; the link gets libFuzzer's main either way).
echo "fuzz: building ${#TARGETS[@]} targets into $SCRATCH" >&2
build=(swift build -c release -Xswiftc -enable-testing --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address)
if [ $# -gt 0 ]; then
    for t in "${TARGETS[@]}"; do
        CHATGPT_CREDENTIAL_FUZZ=1 "${build[@]}" --product "fuzz-$t" || { echo "fuzz: build of fuzz-$t failed" >&2; exit 2; }
    done
else
    CHATGPT_CREDENTIAL_FUZZ=1 "${build[@]}" || { echo "fuzz: build failed" >&2; exit 2; }
fi
for t in "${TARGETS[@]}"; do
    [ -x "$BIN/fuzz-$t" ] || { echo "fuzz: no fuzz-$t was built: is \"$t\" in Package.swift's fuzzTargets?" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/chatgpt-credential-fuzz.XXXXXX")
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_EACH}s each, $JOBS at a time, work dir $WORK"
LIMITS=(-timeout=5 -rss_limit_mb=1024 -malloc_limit_mb=1024 -detect_leaks=1)

# Runs one target; writes its one-line verdict to $WORK/<target>/result (PASS … or FAIL …).
run_target() {
    local t=$1 dir="$WORK/$1"
    local corpus="$dir/corpus" art="$dir/artifacts/" log="$dir/log" exe="$BIN/fuzz-$1"
    mkdir -p "$corpus" "$art"
    [ -d "$ROOT/fuzz/corpus/$t" ] && cp -R "$ROOT/fuzz/corpus/$t/." "$corpus/"
    local seeds start rc runs cov corp crash took
    seeds=$(find "$corpus" -type f | wc -l)
    start=$(date +%s)
    # Every committed input once, at full length (the fuzzing run below would cut them to -max_len).
    "$exe" -runs=0 "${LIMITS[@]}" -artifact_prefix="$art" "$corpus" >"$dir/replay.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$SECONDS_EACH" -gt 0 ]; then
        "$exe" "$corpus" -max_total_time="$SECONDS_EACH" -max_len="$(max_len "$t")" "${LIMITS[@]}" \
            -artifact_prefix="$art" -print_final_stats=1 >"$log" 2>&1
        rc=$?
    else
        cp "$dir/replay.log" "$log"
    fi
    took=$(( $(date +%s) - start ))
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
    corp=$(find "$corpus" -type f | wc -l)
    crash=$(find "$art" -type f | head -1)
    if [ $rc -eq 0 ] && [ -z "$crash" ]; then
        if [ "$SECONDS_EACH" -gt 0 ]; then
            echo "PASS $t: $seeds seeds replayed, ${runs:-?} runs in ${took}s, cov ${cov:-?}, corpus $seeds -> $corp" >"$dir/result"
        else
            echo "PASS $t: $seeds seeds replayed in ${took}s, cov ${cov:-?}" >"$dir/result"
        fi
        return
    fi
    echo "FAIL $t: exit $rc after ${took}s${crash:+, input $crash}" >"$dir/result"
    {
        echo "---- $t failed (exit $rc); last lines of $log:"
        grep -E 'ERROR|FUZZ INVARIANT|Fatal error|SUMMARY|deadly signal|Test unit written' "$log" | head -10
        tail -5 "$log"
        if [ -n "$crash" ]; then
            echo "reproduce: SWIFT_BACKTRACE=enable=no $exe $crash"
            # A timeout on a loaded machine can be the machine: time the input on its own.
            case "$(basename "$crash")" in timeout-*)
                local t0; t0=$(date +%s%N)
                "$exe" -timeout=60 -runs=1 "$crash" >/dev/null 2>&1
                echo "the timed-out input alone took $(( ($(date +%s%N) - t0) / 1000000 )) ms (load: $(cut -d' ' -f1-3 /proc/loadavg))" ;;
            esac
        fi
    } >"$dir/failure"
}

for t in "${TARGETS[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    run_target "$t" &
done
wait

passed=0 failed=0
for t in "${TARGETS[@]}"; do
    [ -f "$WORK/$t/failure" ] && cat "$WORK/$t/failure" >&2
done
echo
for t in "${TARGETS[@]}"; do
    result=$(cat "$WORK/$t/result" 2>/dev/null || echo "FAIL $t: no result")
    echo "$result"
    case "$result" in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] || { echo "fuzz: logs and inputs kept in $WORK" >&2; exit 1; }
rm -rf "$WORK"
