#!/bin/sh
# DWARF line lookup, addr2line crate (gimli) vs blazesym (BENCHMARKS.md,
# "DWARF line info"). Two binaries: libbpf.so built with -g -O2 from the
# sources cargo fetched for libbpf-sys (DWARF in the file, much inlining),
# and libc.so.6 through its separate debug file found by build id
# (libc6-dbg: SHF_COMPRESSED zlib sections). The pcs are return addresses
# minus one (the instruction after every call, as stack frames are), at most
# $N of them; binutils' `addr2line -a -i -f` and llvm-symbolizer (GNU
# style; it names the outermost function from the symbol table, so the
# names of a chain differ where DWARF's name is an alias) are the references. Each library
# runs in a process of its own, $RUNS times (the figures of each run).
set -eu
N=${N:-4000}
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-$(mktemp -d /tmp/jtrace-lines.XXXXXX)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/../target/lines-bench}
(cd "$here/lines" && cargo build --release -q)
bench=$CARGO_TARGET_DIR/release/lines-bench

# libbpf's sources (fetched by cargo for libbpf-sys): a real C library, -O2 inlines much of it.
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libbpf-sys-*/libbpf 2>/dev/null | head -1)
[ -n "$src" ] || { echo "no libbpf sources (cargo fetch in the workspace first)" >&2; exit 1; }
cc -g -O2 -fPIC -shared -w -I"$src/include" -I"$src/include/uapi" -I"$src/src" \
    -D_LARGEFILE64_SOURCE -D_FILE_OFFSET_BITS=64 -o "$work/libbpf.so" "$src"/src/*.c

libc=$(ldd /bin/true | awk '/libc.so/{print $3}')
bid=$(readelf -n "$libc" | awk '/Build ID/{print $3}')
libc_debug=/usr/lib/debug/.build-id/$(echo "$bid" | cut -c1-2)/$(echo "$bid" | cut -c3-).debug
[ -f "$libc_debug" ] || { echo "no $libc_debug (apt-get install libc6-dbg)" >&2; exit 1; }

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for case in "libbpf $work/libbpf.so $work/libbpf.so" "libc $libc $libc_debug"; do
    set -- $case
    name=$1 bin=$2 dwarf=$3
    # Return addresses - 1 of every call in .text, spread evenly.
    objdump -d --no-show-raw-insn "$bin" | awk '
        /^ *[0-9a-f]+:/ { addr = $1; sub(":", "", addr); if (after) { print addr; after = 0 } }
        /^ *[0-9a-f]+:\t(call|bnd call)/ { after = 1 }' > "$work/$name.ras"
    total=$(wc -l < "$work/$name.ras")
    python3 -c 'import sys
ras = [int(l, 16) for l in open(sys.argv[1])]
n = int(sys.argv[2])
step = max(len(ras) / n, 1)
for i in range(min(n, len(ras))):
    print(hex(ras[int(i * step)] - 1))' "$work/$name.ras" "$N" > "$work/$name.pcs"
    echo "== $name: $(wc -l < "$work/$name.pcs") pcs (of $total return addresses), DWARF in $dwarf ($(du -h "$dwarf" | cut -f1))"
    start=$(date +%s%N)
    addr2line -a -i -f -e "$dwarf" < "$work/$name.pcs" > "$work/$name.binutils"
    echo "binutils addr2line: $(( ($(date +%s%N) - start) / 1000000 )) ms for all (one process)"
    start=$(date +%s%N)
    llvm-symbolizer --output-style=GNU -a -i -f -e "$dwarf" < "$work/$name.pcs" > "$work/$name.llvm"
    echo "llvm-symbolizer: $(( ($(date +%s%N) - start) / 1000000 )) ms for all (one process)"
    for lib in addr2line blazesym; do
        for r in $(seq "$RUNS"); do
            "$bench" "$lib" "$dwarf" "$work/$name.pcs" > "$work/$name.$lib" 2> "$work/$name.$lib.err" || { cat "$work/$name.$lib.err"; exit 1; }
            echo "  run $r: $(cat "$work/$name.$lib.err")"
        done
        python3 "$here/lines_compare.py" "$work/$name.binutils" "$work/$name.$lib" "  $lib" binutils
        python3 "$here/lines_compare.py" "$work/$name.llvm" "$work/$name.$lib" "  $lib" llvm-symbolizer
    done
done
echo "outputs in $work"
