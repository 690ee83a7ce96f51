#!/usr/bin/env bash
# HTML timeline load/render and export times on a synthetic trace of ~1.07 M
# records (16 threads, monitor evidence, GC windows), in headless Chromium.
# Prints min and median over 5 runs of each figure (ms).
# Usage: bench/timeline.sh   (needs chromium, or $JTRACE_CHROMIUM)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test -q --release -p jtrace-timeline --test bench -- --ignored --nocapture million_events 2>&1 |
    grep -E '^(rust ms|page ms|events|last page state)'
