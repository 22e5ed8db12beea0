#!/bin/sh
# strata-bench micro with data larger than the cache: 10,000,000 rows (about 1 GiB over
# the five indexes), a 64 MiB block cache and direct-I/O reads for Strata, so eager
# mode's hidden reads reach the disk. Extra arguments are passed on (e.g. --engines,
# --seconds, --json, --plot). Run from the workspace root after
# `cargo build --release -p strata-bench`.
set -eu
exec "${STRATA_BENCH:-target/release/strata-bench}" micro \
    --rows 10000000 --cache-size 67108864 --direct-reads "$@"
