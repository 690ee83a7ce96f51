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

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jtrace_symbols::bounded_read::open_regular;
use jtrace_symbols::hotspot::{SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL};

use crate::libcalls::{lookup_functions_in, LibCallSpec, ResolvedLibCall, Sym};

/// Where JDKs are installed on Debian-like systems (one per subdirectory).
const JVM_DIR: &str = "/usr/lib/jvm";

/// A `libjvm.so` to probe: the name its probes are shown by, and the file,
/// open (its symbols are read from it, its uprobes attach to it).
#[derive(Debug)]
pub struct Libjvm {
    /// Its path, as the trace names its probes' library.
    pub name: PathBuf,
    /// The file.
    pub file: File,
}

/// `libjvm.so` of the JDK a `java` launcher (a name looked up in `PATH`,
/// or a path) belongs to: `<home>/bin/java` → `<home>/lib/server/libjvm.so`.
/// The launcher is the user's choice: run this with the rights of the user
/// who named it, and open what it finds with them too.
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
/// (`/proc/PID/map_files/<range>`, which the kernel resolves), opened
/// through that link, never its path walked again from the host: in a
/// container a link on that path could lead onto the host's files. Needs
/// root.
pub fn libjvm_of_pid(pid: u32) -> Option<Libjvm> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let range = maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        f.nth(4)?.ends_with("/libjvm.so").then_some(range)
    })?;
    let name = PathBuf::from(format!("/proc/{pid}/map_files/{range}"));
    let file = open_regular(&name).ok()?;
    Some(Libjvm { name, file })
}

/// Every `libjvm.so` of the JDKs installed in the system's JVM directory
/// (root's), by their real paths.
fn installed_libjvms() -> Vec<Libjvm> {
    let Ok(dir) = std::fs::read_dir(JVM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.path().join("lib/server/libjvm.so").canonicalize().ok())
        .filter_map(|name| {
            Some(Libjvm {
                file: open_regular(&name).ok()?,
                name,
            })
        })
        .collect()
}

/// Probes that record the safepoints of the JVM using `libjvm`, or when it
/// is not known (the command is a script, say), of any JDK installed in
/// `/usr/lib/jvm`. Each probed library costs time when recording stops
/// (the kernel waits for an RCU grace period per detached link, ≈0.1 s
/// here: two links per library with uprobe.multi, four before Linux 6.6),
/// hence not probing every JDK when the JVM is known. A `libjvm.so` whose
/// two symbols cannot be found (a stripped build, a file that is no ELF
/// file or is past the bounds of `jtrace_symbols::bounded_read`) is left
/// out and said why in the second list, so the caller can say why there
/// are no safepoint windows.
pub fn safepoint_calls(libjvm: Option<Libjvm>) -> (Vec<ResolvedLibCall>, Vec<String>) {
    let libs = match libjvm {
        Some(lib) => vec![lib],
        None => installed_libjvms(),
    };
    let mut seen = HashSet::new();
    let (mut calls, mut unprobed) = (Vec::new(), Vec::new());
    for lib in libs {
        // Each file once, under whichever of its names came first.
        if let Ok(m) = lib.file.metadata() {
            if !seen.insert((m.dev(), m.ino())) {
                continue;
            }
        }
        match probes_of(&lib.name.to_string_lossy(), &lib.name, Arc::new(lib.file)) {
            Ok(probes) => calls.extend(probes),
            Err(why) => unprobed.push(why),
        }
    }
    (calls, unprobed)
}

/// The two safepoint probes of the `libjvm.so` open as `file` (`path` in
/// messages), shown as library `shown`; or why there are none.
pub(crate) fn probes_of(shown: &str, path: &Path, file: Arc<File>) -> Result<Vec<ResolvedLibCall>, String> {
    let symbols = [SAFEPOINT_BEGIN_SYMBOL, SAFEPOINT_END_SYMBOL];
    let found = lookup_functions_in(&file, path, &symbols).map_err(|e| format!("{e:#}"))?;
    symbols
        .iter()
        .zip(found)
        .map(|(symbol, sym)| match sym {
            Sym::Function(offset) => Ok(ResolvedLibCall {
                spec: LibCallSpec {
                    library: shown.to_string(),
                    symbol: symbol.to_string(),
                },
                path: path.to_path_buf(),
                offset,
                file: file.clone(),
            }),
            _ => Err(format!(
                "{} has no SafepointSynchronize symbols (stripped?)",
                path.display()
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's OpenJDK 17 and Temurin 25 both keep the symbols.
    #[test]
    fn installed_jdks_have_safepoint_symbols() {
        let (calls, stripped) = safepoint_calls(None);
        assert!(stripped.is_empty(), "stripped libjvm.so: {stripped:?}");
        let jdks = installed_libjvms().len();
        assert!(jdks >= 1, "no JDK in {JVM_DIR}");
        assert!(calls.len() >= 2 && calls.len() % 2 == 0, "{calls:?}");
        assert!(calls.iter().any(|c| c.spec.symbol == SAFEPOINT_BEGIN_SYMBOL));
        let java = libjvm_of_launcher("java").expect("java in PATH");
        assert!(calls
            .iter()
            .any(|c| Path::new(&c.spec.library) == java.canonicalize().unwrap()));
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
            found = libjvm_of_pid(jvm.id()).and_then(|l| l.file.metadata().ok().map(|m| (m.dev(), m.ino())));
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
        assert!(libjvm_of_pid(u32::MAX).is_none());
    }
}
