//! Generates the Rust side of the C headers this crate shares with the BPF
//! programs (bpf/c/ includes them), with bindgen, as agent/build.rs does for
//! JVMTI:
//! - `c/kernel_records.h` -> `$OUT_DIR/kernel_records.rs`: the kernel record
//!   kinds and layouts, which src/kernel.rs encodes and decodes by;
//! - `c/syscall_nr.h` -> `$OUT_DIR/syscall_nr.rs`: the x86-64 syscall numbers
//!   (`NR_read` becomes `READ`), exported as `syscall_nr`.

use std::collections::BTreeMap;
use std::env;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bindgen::callbacks::{IntKind, ItemInfo, ItemKind, ParseCallbacks};

/// The syscall constants in Rust style (`NR_clock_nanosleep` ->
/// `CLOCK_NANOSLEEP: u32`); collects them by number for the `ALL` table.
#[derive(Debug, Default)]
struct SyscallNames(Arc<Mutex<BTreeMap<i64, String>>>);

impl ParseCallbacks for SyscallNames {
    fn item_name(&self, item: ItemInfo) -> Option<String> {
        match item.kind {
            ItemKind::Var => item.name.strip_prefix("NR_").map(str::to_ascii_uppercase),
            _ => None,
        }
    }

    fn int_macro(&self, name: &str, value: i64) -> Option<IntKind> {
        let syscall = name.strip_prefix("NR_")?;
        self.0.lock().expect("not poisoned").insert(value, syscall.to_string());
        Some(IntKind::U32)
    }
}

fn generate(header: &Path, out: &Path, configure: impl FnOnce(bindgen::Builder) -> bindgen::Builder) {
    println!("cargo:rerun-if-changed={}", header.display());
    // The header expects the kernel's __u8 ... __s64 from its includer.
    let prelude = format!("#include <linux/types.h>\n#include \"{}\"\n", header.display());
    let builder = bindgen::Builder::default()
        .header_contents("prelude.h", &prelude)
        .use_core()
        .derive_debug(false)
        .layout_tests(false)
        .generate_comments(false);
    configure(builder)
        .generate()
        .unwrap_or_else(|e| panic!("jtrace-format build: bindgen failed on {}: {e}", header.display()))
        .write_to_file(out)
        .unwrap_or_else(|e| panic!("jtrace-format build: writing {}: {e}", out.display()));
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("c");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    generate(&dir.join("kernel_records.h"), &out.join("kernel_records.rs"), |b| {
        b.allowlist_type("rec_hdr|fd_object|fd_info|ustack_frame|.*_rec")
            .allowlist_var(
            "COMM_LEN|K_.*|FDK_.*|SYSCALL_.*|WAKEUP_.*|EXEC_.*|STACK_.*|THROTTLE_.*|BLOCK_STACK_.*|PREV_TID_UNKNOWN",
        )
    });
    let names = SyscallNames::default();
    let seen = names.0.clone();
    let syscalls = out.join("syscall_nr.rs");
    generate(&dir.join("syscall_nr.h"), &syscalls, |b| {
        b.allowlist_var("NR_.*").parse_callbacks(Box::new(names))
    });
    // The same numbers as a table, for looking them up by name and back.
    let mut table = String::from(
        "/// Every number above with the kernel's name of its syscall.\npub const ALL: &[(&str, u32)] = &[\n",
    );
    for name in seen.lock().expect("not poisoned").values() {
        table += &format!("    (\"{name}\", {}),\n", name.to_ascii_uppercase());
    }
    table += "];\n";
    std::fs::OpenOptions::new()
        .append(true)
        .open(&syscalls)
        .and_then(|mut f| f.write_all(table.as_bytes()))
        .unwrap_or_else(|e| panic!("jtrace-format build: writing {}: {e}", syscalls.display()));
}
