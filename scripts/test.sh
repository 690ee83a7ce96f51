#!/usr/bin/env bash
# Every test, including the root / eBPF / real-JVM ones (the `system-tests`
# feature; plain `cargo test` leaves them out): run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" != 0 ]; then
    echo "test: the eBPF and JVM tests need root; run: sudo $0" >&2
    exit 2
fi
cargo build --release --workspace --all-features
cargo test --release --workspace --all-features --no-fail-fast -- --test-threads=2
