#!/usr/bin/env bash
# Builds strata-bench with the `rocksdb` feature against the system's RocksDB library
# (Debian's librocksdb-dev, 7.8 on Debian 12) instead of compiling the bundled one,
# which takes 20 minutes to hours on 2 cores. The peer is then that RocksDB version.
# The benchmarks call only C API entry points 7.x has (engines/rocksdb.rs); the one
# the rocksdb crate links but 7.x lacks is stubbed by rocksdb7-compat.c. Debian
# packages only; run as root (or with sudo).
#
#   crates/strata-bench/scripts/build-with-system-rocksdb.sh
#   target/release/strata-bench lethe --kiwi --kiwi-only 1,8,auto,a,c
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
# A user's PATH on Debian lacks /sbin, where ldconfig lives.
ldconfig() { PATH="$PATH:/sbin:/usr/sbin" command ldconfig "$@"; }

missing=()
[ -e /usr/include/rocksdb/c.h ] || missing+=(librocksdb-dev)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
ldconfig -p 2>/dev/null | grep -q 'libclang[-0-9.]*\.so' || missing+=(libclang-dev)
if [ "${#missing[@]}" -ne 0 ]; then
    echo "build-with-system-rocksdb: installing ${missing[*]}"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

lib="$(ldconfig -p | awk '/librocksdb\.so /{print $NF; exit}')"
if [ -z "$lib" ]; then
    echo "build-with-system-rocksdb: librocksdb.so not found (is librocksdb-dev installed?)" >&2
    exit 1
fi
libdir="$(dirname "$lib")"
target="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target"
cc -O2 -fPIC -c -o "$target/rocksdb7-compat.o" "$here/rocksdb7-compat.c"

cd "$root"
# `cargo rustc` passes the stub to the final link only, so nothing else rebuilds.
ROCKSDB_LIB_DIR="$libdir" cargo rustc --release -p strata-bench --bin strata-bench --features rocksdb \
    -- -C link-arg="$target/rocksdb7-compat.o"
echo "build-with-system-rocksdb: $target/release/strata-bench links $(ls "$libdir"/librocksdb.so.* | head -1)"
