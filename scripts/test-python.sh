#!/usr/bin/env bash
# Installs the Python packages the export tests decode and query with into
# the build tree, target/pydeps (nothing system-wide): PyPI `perfetto`
# (perfetto_trace_pb2, Perfetto's official trace schema, and its
# trace_processor API), `protobuf` (which the schema module runs on, and
# pprof's profile.proto decoding), `duckdb` (the Parquet tests' SQL) and
# `datafusion` with `pyarrow` (the fleet example, examples/fleet/, docs/SCALE.md).
# Pinned versions; idempotent (a set already installed at these versions is
# kept). The tests put target/pydeps on PYTHONPATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/target/pydeps"
pins=(perfetto==0.59.1 protobuf==7.36.2 duckdb==2.0.0
      datafusion==55.0.0 pyarrow==26.0.1 cloudpickle==3.1.2 typing_extensions==4.16.0)
export PIP_ROOT_USER_ACTION=ignore
mkdir -p "$root/target"
# Tests run in parallel and each may call this: one installs, the others wait.
exec 9>"$root/target/.pydeps.lock"
flock 9
if [ "$(cat "$dest/.pins" 2>/dev/null)" = "${pins[*]}" ]; then
    exit 0
fi
python3 -m pip --version >/dev/null 2>&1 || {
    echo "test-python: pip is required (Debian: apt-get install python3-pip)" >&2
    exit 2
}
echo "test-python: installing ${pins[*]} into $dest"
tmp="$(mktemp -d "$root/target/.pydeps-XXXXXX")"
python3 -m pip install --quiet --no-compile --disable-pip-version-check --target "$tmp" "${pins[@]}"
echo "${pins[*]}" >"$tmp/.pins"
rm -rf "$dest"
mv "$tmp" "$dest"
