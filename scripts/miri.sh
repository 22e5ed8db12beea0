#!/usr/bin/env bash
# Runs the arena skiplist's tests (the memtable's unsafe code: raw node layout, atomic
# links, lock-free inserts and readers) under miri, which checks every pointer access
# for undefined behaviour and data races. The tests scale their counts down under
# cfg(miri) (`SCALE` in memtable/skiplist.rs).
#
#   scripts/miri.sh
#
# Needs the nightly toolchain; installs its miri component when missing (rustup reaches
# the Rust distribution server). Without nightly it says so and exits 0 ("skipped").
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "miri: skipped (no nightly toolchain)"
    exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add --toolchain nightly miri
fi
cargo +nightly miri setup
# -Zmiri-many-seeds would try several schedules; one seed per run keeps CI short.
MIRIFLAGS="${MIRIFLAGS:-}" cargo +nightly miri test -p strata --lib memtable::skiplist
