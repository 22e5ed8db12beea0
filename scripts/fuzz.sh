#!/usr/bin/env bash
# Runs every cargo-fuzz target of Strata (crates/strata/fuzz) for N seconds each.
#
#   scripts/fuzz.sh [SECONDS]        default 30; FUZZ_TARGETS="a b" limits the targets
#
# Needs a nightly toolchain and cargo-fuzz; without them it says how to install them
# and exits 0 ("skipped"). The seed corpus in crates/strata/fuzz/corpus/<target> is
# only read: new inputs go to crates/strata/fuzz/target/fuzz-work/corpus/<target>.
# Exits 1 if a target crashed (the reproducer is in crates/strata/fuzz/artifacts/).
set -u

SECS="${1:-30}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/crates/strata/fuzz"

if ! command -v rustup >/dev/null 2>&1 || ! rustup run nightly rustc --version >/dev/null 2>&1 \
    || ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: skipped (needs a nightly toolchain and cargo-fuzz)"
    echo "  install: rustup toolchain install nightly --profile minimal && cargo install cargo-fuzz"
    exit 0
fi

cd "$FUZZ" || exit 1
targets="${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}"
work="$FUZZ/target/fuzz-work"
mkdir -p "$work/logs"
status=0
for t in $targets; do
    mkdir -p "$work/corpus/$t"
    log="$work/logs/$t.log"
    seeds="corpus/$t"
    [ -d "$seeds" ] || seeds=""
    if cargo +nightly fuzz run "$t" "$work/corpus/$t" $seeds -- \
        -max_total_time="$SECS" -print_final_stats=1 >"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        status=1
    fi
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | awk '{print $2}')"
    printf 'fuzz %-16s %-7s %12s execs in %ss  (log: %s)\n' "$t" "$result" "${execs:-?}" "$SECS" "$log"
    if [ "$result" = FAILED ]; then
        grep -m3 -E 'panicked|ERROR: libFuzzer|deadly signal|error(\[|:)' "$log" | sed 's/^/    /'
    fi
done
if [ "$status" -ne 0 ]; then
    echo "fuzz: failures above; reproducers in $FUZZ/artifacts/<target>/"
fi
exit "$status"
