#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 60, or $FUZZ_SECONDS) on a copy of
# its committed corpus (fuzz/corpus/<target>, never modified; new inputs are thrown away).
# Exits non-zero when any target crashes, leaks, times out or runs out of memory, and prints the
# saved input and a reproducer command for it.
# Usage: fuzz/run.sh [SECONDS] [TARGET…]      e.g. fuzz/run.sh 10 git json
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-${FUZZ_SECONDS:-60}}
shift || true
export PATH="/opt/swift/usr/bin:$PATH"
export SWIFT_BACKTRACE=enable=no   # a crash otherwise hangs in the Swift backtracer
OUT=${FUZZ_BUILD_DIR:-$ROOT/fuzz/.build}

# Largest input per target: what the parser would ever be given, plus some slack.
max_len() {
    case "$1" in
        age) echo 66000 ;;            # one full 64 KiB payload chunk and a header
        git|docker|token_import|token_document|json|jwt|issuer) echo 4096 ;;
        hosts|clock|base64|config) echo 512 ;;
        loopback) echo 16500 ;;       # LoopbackListener.maxHeaderBytes (16 KiB) and a little more
        pasteback) echo 8192 ;;       # PasteBackFlow.maxLine
        *) echo 4096 ;;
    esac
}

if [ $# -gt 0 ]; then TARGETS=("$@"); else
    TARGETS=(); for f in "$ROOT"/fuzz/targets/*.swift; do n=$(basename "$f" .swift); [ "$n" = Common ] || TARGETS+=("$n"); done
fi

if ! "$ROOT/fuzz/build.sh" "${TARGETS[@]}"; then echo "fuzz: build failed" >&2; exit 2; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/chatgpt-credential-fuzz.XXXXXX")
echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_EACH}s each, work dir $WORK"
passed=0 failed=0 summary=()
for t in "${TARGETS[@]}"; do
    corpus="$WORK/$t/corpus" art="$WORK/$t/artifacts/"
    mkdir -p "$corpus" "$art"
    [ -d "$ROOT/fuzz/corpus/$t" ] && cp -R "$ROOT/fuzz/corpus/$t/." "$corpus/"
    seeds=$(find "$corpus" -type f | wc -l)
    log="$WORK/$t/log"
    start=$(date +%s)
    "$OUT/fuzz-$t" "$corpus" -max_total_time="$SECONDS_EACH" -max_len="$(max_len "$t")" -timeout=5 \
        -rss_limit_mb=1024 -malloc_limit_mb=1024 -detect_leaks=1 -artifact_prefix="$art" -print_final_stats=1 \
        >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
    corp=$(find "$corpus" -type f | wc -l)
    crash=$(find "$art" -type f | head -1)
    if [ $rc -eq 0 ] && [ -z "$crash" ]; then
        passed=$((passed + 1))
        summary+=("PASS $t: ${runs:-?} runs in ${took}s, cov ${cov:-?}, corpus $seeds -> $corp")
    else
        failed=$((failed + 1))
        summary+=("FAIL $t: exit $rc after ${took}s${crash:+, input $crash}")
        echo "---- $t failed (exit $rc); last lines of $log:" >&2
        grep -E 'ERROR|FUZZ INVARIANT|Fatal error|SUMMARY|deadly signal|Test unit written' "$log" | head -10 >&2
        tail -5 "$log" >&2
        if [ -n "$crash" ]; then
            echo "reproduce: SWIFT_BACKTRACE=enable=no $OUT/fuzz-$t $crash" >&2
            # A timeout on a loaded machine can be the machine: time the input on its own.
            case "$(basename "$crash")" in timeout-*)
                t0=$(date +%s%N)
                "$OUT/fuzz-$t" -timeout=60 -runs=1 "$crash" >/dev/null 2>&1
                echo "the timed-out input alone took $(( ($(date +%s%N) - t0) / 1000000 )) ms (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2 ;;
            esac
        fi
    fi
done
echo
for l in "${summary[@]}"; do echo "$l"; done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] || { echo "fuzz: logs and inputs kept in $WORK" >&2; exit 1; }
rm -rf "$WORK"
