#!/usr/bin/env bash
# Installs what jtrace needs to build and run on a fresh Debian machine:
# clang + libbpf build deps for the eBPF programs, gcc and binutils for the
# native programs of the stacks tests (cc, strip), libclang for bindgen,
# bpftool for vmlinux.h, taskset, chromium and GNU time (peak memory) for
# the tests, perf and bpftrace for the comparison benchmark
# (bpf/bench/run.sh), libc6-dbg (libc's separate debug file: source lines
# of libc frames, and bench/lines.sh; llvm's llvm-symbolizer is its
# reference), and the
# unprivileged account of the security tests (scripts/test-user.sh), and
# the JDK 11 and 21 runtimes the tests run on besides the system's JDK 17
# and Temurin 25 (scripts/test-jdks.sh, into target/jdks/), and podman,
# crun and uidmap for the tests of attach into containers (rootful and
# rootless, tests/containers_attach.rs).
# Idempotent; needs root for the packages.
set -euo pipefail
pkgs=(clang llvm gcc binutils libclang-dev libelf-dev zlib1g-dev pkg-config bpftool util-linux make chromium linux-perf bpftrace time libc6-dbg podman crun uidmap)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages ${missing[*]}; run as root (sudo) to install them" >&2
        exit 2
    fi
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required" >&2; exit 2; }
command -v javac >/dev/null || { echo "setup: a JDK (javac) is required" >&2; exit 2; }
[ -r /sys/kernel/btf/vmlinux ] || { echo "setup: this kernel has no BTF (/sys/kernel/btf/vmlinux); jtrace needs CONFIG_DEBUG_INFO_BTF" >&2; exit 2; }
bash "$(dirname "$0")/test-jdks.sh"
bash "$(dirname "$0")/test-python.sh"
[ "$(id -u)" != 0 ] || bash "$(dirname "$0")/test-user.sh"
# crun refuses a cgroup hierarchy in hybrid mode (v1 hierarchies plus
# /sys/fs/cgroup/unified) while the unified one holds a controller: mount
# each such controller as a v1 hierarchy of its own.
if [ "$(id -u)" = 0 ] && mountpoint -q /sys/fs/cgroup/unified 2>/dev/null \
    && [ "$(stat -f -c %T /sys/fs/cgroup/unified)" = cgroup2fs ]; then
    for c in $(cat /sys/fs/cgroup/unified/cgroup.controllers); do
        mountpoint -q "/sys/fs/cgroup/$c" && continue
        mkdir -p "/sys/fs/cgroup/$c"
        mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
    done
fi
