#!/usr/bin/env bash
# The habits CI holds before any test runs (the first stage of .ci/run):
# formatting, clippy with warnings as errors, documentation that builds
# without a warning, and imports that go one way between modules
# (docs/ARCHITECTURE.md). Fast: it compiles nothing it would not share
# with the release build of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all --check
cargo clippy --release --workspace --all-targets --all-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace
python3 scripts/check-module-cycles.py
