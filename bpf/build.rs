//! Compiles every `c/*.bpf.c` into a BPF object and a Rust skeleton
//! (`$OUT_DIR/<name>.skel.rs`), against a `vmlinux.h` generated from the
//! running kernel's BTF. CO-RE relocations make the objects portable anyway.
//! The programs include the format's headers (`../format/c`: the record
//! layouts, the syscall numbers). The constants `c/jtrace.h` shares with
//! the recorder are generated into `$OUT_DIR/jtrace_h.rs` with bindgen.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;
use libbpf_rs::Linker;

const BTF: &str = "/sys/kernel/btf/vmlinux";

/// bpftool is often outside a non-root PATH (Debian puts it in /usr/sbin).
fn find_bpftool() -> PathBuf {
    if let Some(p) = env::var_os("BPFTOOL") {
        return PathBuf::from(p);
    }
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join("bpftool"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "bpftool not found in PATH, /usr/sbin or /sbin; it is needed to generate \
                 vmlinux.h (Debian/Ubuntu: apt-get install bpftool, or set BPFTOOL=/path)"
            )
        })
}

fn gen_vmlinux_h(out: &Path) {
    if !Path::new(BTF).exists() {
        panic!(
            "kernel has no BTF at {BTF}; building the BPF programs needs a kernel with \
             CONFIG_DEBUG_INFO_BTF=y"
        );
    }
    let bpftool = find_bpftool();
    let output = Command::new(&bpftool)
        .args(["btf", "dump", "file", BTF, "format", "c"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bpftool.display()));
    if !output.status.success() {
        panic!(
            "{} btf dump file {BTF} format c failed ({}): {}",
            bpftool.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::write(out.join("vmlinux.h"), &output.stdout).unwrap_or_else(|e| panic!("writing vmlinux.h: {e}"));
}

/// Every file in `dir`, sorted, each a reason to rebuild.
fn sources_in(dir: &Path) -> Vec<PathBuf> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    sources.sort();
    for p in &sources {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    sources
}

/// The constants of `c/jtrace.h` (counter slots, filter size, syscall
/// modes) for the recorder.
fn gen_shared_constants(c_dir: &Path, out: &Path) {
    let header = c_dir.join("jtrace.h");
    let rs = out.join("jtrace_h.rs");
    // The header expects the kernel's __u32/__u64 from its includer.
    let prelude = format!("#include <linux/types.h>\n#include \"{}\"\n", header.display());
    bindgen::Builder::default()
        .header_contents("prelude.h", &prelude)
        .allowlist_file(".*/jtrace\\.h")
        .use_core()
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on {}: {e}", header.display()))
        .write_to_file(&rs)
        .unwrap_or_else(|e| panic!("writing {}: {e}", rs.display()));
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let c_dir = manifest.join("c");
    // The format's headers (the jtrace-format crate is a dependency).
    let format_c = manifest.join("../format/c");

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    gen_vmlinux_h(&out);
    gen_shared_constants(&c_dir, &out);
    sources_in(&format_c);
    let sources = sources_in(&c_dir);
    // Every *.bpf.c (one concern each) is compiled on its own, then all are
    // statically linked into one BPF object, so that their programs share
    // the maps jtrace.bpf.h defines __weak; one skeleton (`jtrace.skel.rs`).
    let mut objs = Vec::new();
    for src in sources.iter().filter(|p| p.to_string_lossy().ends_with(".bpf.c")) {
        let file = src.file_name().unwrap().to_string_lossy();
        let name = file.trim_end_matches(".bpf.c");
        let obj = out.join(format!("{name}.part.o"));
        SkeletonBuilder::new()
            .source(src)
            .obj(&obj)
            .clang_args([
                // v3: atomic OR (the filter bitmap) and 32-bit jumps; any
                // kernel that runs jtrace (5.15+) has them.
                "-mcpu=v3".as_ref(),
                "-Wall".as_ref(),
                "-I".as_ref(),
                out.as_os_str(),
                "-I".as_ref(),
                c_dir.as_os_str(),
                "-I".as_ref(),
                format_c.as_os_str(),
            ])
            .build()
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        objs.push(obj);
    }
    let linked = out.join("jtrace.bpf.o");
    // libbpf's own static linker (libbpf-sys's, recent): the one of an older
    // bpftool cannot link a kfunc extern declared by two objects.
    let mut linker =
        Linker::new(&linked).unwrap_or_else(|e| panic!("creating the BPF linker for {}: {e:#}", linked.display()));
    for obj in &objs {
        linker
            .add_file(obj)
            .unwrap_or_else(|e| panic!("linking {}: {e:#}", obj.display()));
    }
    linker
        .link()
        .unwrap_or_else(|e| panic!("linking the BPF objects into {}: {e:#}", linked.display()));
    drop(linker);
    SkeletonBuilder::new()
        .obj(&linked)
        .generate(out.join("jtrace.skel.rs"))
        .unwrap_or_else(|e| panic!("generating the skeleton of {}: {e:#}", linked.display()));
}
