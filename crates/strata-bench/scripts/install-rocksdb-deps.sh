#!/usr/bin/env bash
# Installs what the `rocksdb` feature of strata-bench needs to build: the `rocksdb` crate
# compiles its bundled RocksDB with a C++ compiler (cc) and generates its bindings with
# bindgen, which loads libclang at build time. Debian packages only; run as root.
#
#   crates/strata-bench/scripts/install-rocksdb-deps.sh
#   nice -n 10 cargo build --release -p strata-bench --features rocksdb
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
if ! ldconfig -p 2>/dev/null | grep -q 'libclang[-0-9.]*\.so'; then
    missing+=(libclang-dev)
fi

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-rocksdb-deps: nothing to install"
    exit 0
fi

echo "install-rocksdb-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
