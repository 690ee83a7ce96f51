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

use std::path::PathBuf;

use jtrace_symbols::hotspot::{SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL};

use crate::libcalls::{lookup_functions, resolve_path, LibCallSpec, Sym};

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

/// `libjvm.so` mapped by a running process: the mapped file itself
/// (`/proc/PID/map_files/<range>`, which the kernel resolves), never its
/// path walked again from the host: in a container a link on that path
/// could lead onto the host's files. Needs root.
pub fn libjvm_of_pid(pid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let range = maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        f.nth(4)?.ends_with("/libjvm.so").then_some(range)
    })?;
    Some(PathBuf::from(format!("/proc/{pid}/map_files/{range}"))).filter(|p| p.is_file())
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

/// Library calls that record the safepoints of the JVM using `libjvm`, or
/// when it is not known (the command is a script, say), of any JDK
/// installed in `/usr/lib/jvm`. Each probed library costs time when
/// recording stops (the kernel waits for an RCU grace period per detached
/// link, ≈0.1 s here: two links per library with uprobe.multi, four before
/// Linux 6.6), hence not probing every JDK when the JVM is known. A
/// `libjvm.so` without the two symbols (a stripped build) is left out and
/// returned in the second list, so the caller can say why there are no
/// safepoint windows.
pub fn safepoint_calls(libjvm: Option<PathBuf>) -> (Vec<LibCallSpec>, Vec<PathBuf>) {
    let mut libs: Vec<PathBuf> = match libjvm {
        Some(lib) => vec![lib],
        None => installed_libjvms(),
    };
    libs = libs.into_iter().filter_map(|p| resolve_path(&p).ok()).collect();
    libs.sort();
    libs.dedup();
    let (mut calls, mut stripped) = (Vec::new(), Vec::new());
    for lib in libs {
        let symbols = [SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL];
        if lookup_functions(&lib, &symbols).is_ok_and(|s| s.iter().all(|s| matches!(s, Sym::Function(_)))) {
            for symbol in symbols {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    /// Debian's OpenJDK 17 and Temurin 25 both keep the symbols.
    #[test]
    fn installed_jdks_have_safepoint_symbols() {
        let (calls, stripped) = safepoint_calls(None);
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

    /// A running JVM's libjvm.so is found through /proc; no process, none.
    #[test]
    #[cfg_attr(not(feature = "system-tests"), ignore = "needs root (/proc/PID/map_files)")]
    fn libjvm_of_a_running_jvm() {
        let mut jvm = std::process::Command::new("java")
            .args(["-Xshare:off", "-XX:TieredStopAtLevel=1", "-version"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start java");
        // libjvm.so is mapped within milliseconds of exec; poll until then.
        let mut found = None;
        for _ in 0..200 {
            // Looked at while the process lives: its mapping goes with it.
            found = libjvm_of_pid(jvm.id()).and_then(|p| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino())));
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = jvm.kill();
        let _ = jvm.wait();
        let found = found.expect("the JVM maps libjvm.so");
        let expected = std::fs::metadata(libjvm_of_launcher("java").unwrap()).unwrap();
        assert_eq!(found, (expected.dev(), expected.ino()));
        assert_eq!(libjvm_of_pid(u32::MAX), None);
    }
}
