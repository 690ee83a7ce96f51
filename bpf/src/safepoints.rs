//! HotSpot safepoints, seen from the kernel side.
//!
//! JVMTI has no safepoint events, but HotSpot's `libjvm.so` keeps its local
//! symbols, among them `SafepointSynchronize::begin()` (called by the VM
//! thread to bring every Java thread to a stop) and
//! `SafepointSynchronize::end()` (which lets them go). Interposing both as
//! library calls gives the safepoint window: from the call of `begin` to the
//! return of `end`. Safepoints are rare (a few per second at most), so the
//! uprobes cost nothing measurable; the merge turns these spans into
//! safepoint windows of the JVM (`jtrace_merge`, cause `safepoint`).

use std::path::{Path, PathBuf};

use jtrace_format::{SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL};

use crate::libcalls::{find_function, LibCallSpec, Sym};

/// Where JDKs are installed on Debian-like systems (one per subdirectory).
const JVM_DIR: &str = "/usr/lib/jvm";

/// `libjvm.so` of the JDK a `java` launcher (a name looked up in `PATH`,
/// or a path) belongs to: `<home>/bin/java` → `<home>/lib/server/libjvm.so`.
pub fn libjvm_of_launcher(program: &str) -> Option<PathBuf> {
    let exe = if program.contains('/') {
        PathBuf::from(program)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(program))
            .find(|p| p.is_file())?
    };
    let home = exe.canonicalize().ok()?.parent()?.parent()?.to_path_buf();
    Some(home.join("lib/server/libjvm.so")).filter(|p| p.is_file())
}

/// `libjvm.so` mapped by a running process, reached through its root (so
/// that a JVM in a container is found too).
pub fn libjvm_of_pid(pid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libjvm.so"))?;
    Some(PathBuf::from(format!("/proc/{pid}/root{path}"))).filter(|p| p.is_file())
}

/// Every `libjvm.so` of the JDKs installed in the system's JVM directory.
fn installed_libjvms() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(JVM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .map(|e| e.path().join("lib/server/libjvm.so"))
        .filter(|p| p.is_file())
        .collect()
}

/// Library calls that record the safepoints of JVMs using `hints` (paths of
/// `libjvm.so`) or any JDK installed in `/usr/lib/jvm`. A `libjvm.so`
/// without the two symbols (a stripped build) is left out and reported in
/// the second list, so the caller can say why there are no safepoint
/// windows.
pub fn safepoint_calls(hints: &[PathBuf]) -> (Vec<LibCallSpec>, Vec<PathBuf>) {
    let mut libs: Vec<PathBuf> = hints
        .iter()
        .cloned()
        .chain(installed_libjvms())
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    libs.sort();
    libs.dedup();
    let (mut calls, mut stripped) = (Vec::new(), Vec::new());
    for lib in libs {
        if has_function(&lib, SAFEPOINT_BEGIN_SYMBOL) && has_function(&lib, SAFEPOINT_END_SYMBOL) {
            for symbol in [SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL] {
                calls.push(LibCallSpec {
                    library: lib.to_string_lossy().into_owned(),
                    symbol: symbol.to_string(),
                });
            }
        } else {
            stripped.push(lib);
        }
    }
    (calls, stripped)
}

fn has_function(lib: &Path, symbol: &str) -> bool {
    matches!(find_function(lib, symbol), Ok(Sym::Function))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's OpenJDK 17 and Temurin 25 both keep the symbols.
    #[test]
    fn installed_jdks_have_safepoint_symbols() {
        let (calls, stripped) = safepoint_calls(&[]);
        assert!(stripped.is_empty(), "stripped libjvm.so: {stripped:?}");
        let jdks = installed_libjvms().iter().filter_map(|p| p.canonicalize().ok()).count();
        assert!(jdks >= 1, "no JDK in {JVM_DIR}");
        assert!(calls.len() >= 2 && calls.len() % 2 == 0, "{calls:?}");
        assert!(calls.iter().any(|c| c.symbol == SAFEPOINT_BEGIN_SYMBOL));
        let java = libjvm_of_launcher("java").expect("java in PATH");
        assert!(calls
            .iter()
            .any(|c| Path::new(&c.library) == java.canonicalize().unwrap()));
    }

    #[test]
    fn libjvm_of_self_is_none() {
        assert_eq!(libjvm_of_pid(std::process::id()), None);
    }
}
