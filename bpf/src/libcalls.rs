//! `--lib-calls`: which library functions to interpose with uprobes, found
//! the way the traced program's dynamic linker would find them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) use jtrace_symbols::elf::{lookup_functions, Sym};

use anyhow::{bail, Context, Result};

/// A library function to trace, as the user named it (`libz.so.1:inflate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibCallSpec {
    /// Library: a soname / file name looked up like the dynamic linker
    /// does (`libz.so.1`), or a path (`/opt/app/lib/libfoo.so`).
    pub library: String,
    /// Function symbol in the library's `.dynsym` or `.symtab`.
    pub symbol: String,
}

impl std::fmt::Display for LibCallSpec {
    /// As the user writes it: `LIBRARY:SYMBOL`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.library, self.symbol)
    }
}

/// A [`LibCallSpec`] whose library file and symbol were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedLibCall {
    /// What the user asked for.
    pub spec: LibCallSpec,
    /// The library file the uprobes attach to (symlinks resolved).
    pub path: PathBuf,
    /// File offset of the function's first instruction, where the uprobe goes.
    pub offset: u64,
}

/// Directories searched after the linker cache, as ld.so's defaults.
const LIB_DIRS: [&str; 7] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];

/// Parses `LIB:SYMBOL[,LIB:SYMBOL...]` (white space around entries ignored).
pub fn parse_lib_calls(spec: &str) -> Result<Vec<LibCallSpec>> {
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        // The symbol follows the last ':' so that paths may contain ':'.
        let Some((lib, sym)) = entry.rsplit_once(':') else {
            bail!("--lib-calls entry {entry:?} is not LIBRARY:SYMBOL (e.g. libz.so.1:inflate)");
        };
        if lib.is_empty() || sym.is_empty() || sym.contains(char::is_whitespace) {
            bail!("--lib-calls entry {entry:?} is not LIBRARY:SYMBOL (e.g. libz.so.1:inflate)");
        }
        out.push(LibCallSpec {
            library: lib.to_string(),
            symbol: sym.to_string(),
        });
    }
    Ok(out)
}

/// Finds every library and checks that it defines its symbol as a function,
/// so that a typo fails before anything runs.
pub fn resolve_lib_calls(specs: &[LibCallSpec]) -> Result<Vec<ResolvedLibCall>> {
    let mut cache: Option<Vec<(String, PathBuf)>> = None;
    let paths = specs
        .iter()
        .map(|s| find_library(&s.library, &mut cache))
        .collect::<Result<Vec<_>>>()?;
    // One pass over each library's symbol tables (libjvm.so has ~50k).
    let mut found: HashMap<&Path, Vec<Sym>> = HashMap::new();
    for (i, path) in paths.iter().enumerate() {
        if found.contains_key(path.as_path()) {
            continue;
        }
        let names: Vec<&str> = specs
            .iter()
            .zip(&paths)
            .filter(|(_, p)| *p == path)
            .map(|(s, _)| s.symbol.as_str())
            .collect();
        let syms = lookup_functions(path, &names)
            .with_context(|| format!("reading {} (for {})", path.display(), specs[i].library))?;
        found.insert(path, syms);
    }
    let mut next: HashMap<&Path, usize> = HashMap::new();
    let mut out = Vec::new();
    for (s, path) in specs.iter().zip(&paths) {
        let k = next.entry(path.as_path()).or_insert(0);
        let sym = found[path.as_path()][*k];
        *k += 1;
        let offset = match sym {
            Sym::Function(offset) => offset,
            Sym::Missing => bail!("{} ({}) has no symbol {}", s.library, path.display(), s.symbol),
            Sym::NotFunction => bail!(
                "{} ({}): symbol {} is not a function",
                s.library,
                path.display(),
                s.symbol
            ),
            Sym::Ifunc => bail!(
                "{} ({}): {} is an IFUNC, whose resolver runs once at load time and picks an \
                 implementation; probe that implementation instead (e.g. __{}_avx2; see `nm -D {}`)",
                s.library,
                path.display(),
                s.symbol,
                s.symbol,
                path.display()
            ),
        };
        out.push(ResolvedLibCall {
            spec: s.clone(),
            path: path.clone(),
            offset,
        });
    }
    Ok(out)
}

/// The x86-64 entries of the dynamic linker's cache: (file name, path).
fn ld_cache() -> Vec<(String, PathBuf)> {
    let Ok(o) = Command::new("ldconfig")
        .arg("-p")
        .output()
        .or_else(|_| Command::new("/sbin/ldconfig").arg("-p").output())
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            // "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"
            let (left, path) = l.trim().split_once(" => ")?;
            let (name, flags) = left.split_once(' ')?;
            (flags.contains("x86-64")).then(|| (name.to_string(), PathBuf::from(path)))
        })
        .collect()
}

/// `path` with its links resolved, as the uprobes will see it. A path
/// under /proc (a process's mapped file or a descriptor, which the kernel
/// resolves itself) is kept as it is: the text of its link names the file
/// as another process sees it, not jtrace.
pub(crate) fn resolve_path(path: &Path) -> std::io::Result<PathBuf> {
    if path.starts_with("/proc/") {
        return Ok(path.to_path_buf());
    }
    path.canonicalize()
}

fn find_library(lib: &str, cache: &mut Option<Vec<(String, PathBuf)>>) -> Result<PathBuf> {
    if lib.contains('/') {
        let p = Path::new(lib);
        if !p.is_file() {
            bail!("{lib}: no such file");
        }
        return resolve_path(p).with_context(|| format!("resolving {lib}"));
    }
    let cache = cache.get_or_insert_with(ld_cache);
    let found = cache
        .iter()
        .find(|(n, _)| n == lib)
        .map(|(_, p)| p.clone())
        .filter(|p| p.is_file())
        .or_else(|| LIB_DIRS.iter().map(|d| Path::new(d).join(lib)).find(|p| p.is_file()));
    match found {
        Some(p) => p.canonicalize().with_context(|| format!("resolving {}", p.display())),
        None => bail!(
            "{lib}: not found in the linker cache (ldconfig -p) or {}; give its path instead",
            LIB_DIRS.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let v = parse_lib_calls("libz.so.1:inflate, libc.so.6:getaddrinfo").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].library, "libc.so.6");
        assert_eq!(v[1].symbol, "getaddrinfo");
        assert!(parse_lib_calls("libz.so.1").is_err());
        assert!(parse_lib_calls(":inflate").is_err());
    }

    #[test]
    fn resolves_libc_functions_and_rejects_bad_ones() {
        let ok = resolve_lib_calls(&parse_lib_calls("libc.so.6:getpid").unwrap()).unwrap();
        assert!(ok[0].path.is_file());
        let e = resolve_lib_calls(&parse_lib_calls("libc.so.6:getpidx").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no symbol getpidx"), "{e}");
        let e = resolve_lib_calls(&parse_lib_calls("libnosuch.so.9:f").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("libnosuch.so.9: not found in the linker cache"), "{e}");
        let e = resolve_lib_calls(&parse_lib_calls("libc.so.6:strlen").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("IFUNC"), "{e}");
    }

    /// Several symbols of one library are looked up in one pass, each
    /// answered for itself.
    #[test]
    fn symbols_of_one_library_are_told_apart() {
        let ok = resolve_lib_calls(&parse_lib_calls("libc.so.6:getpid,libc.so.6:getppid").unwrap()).unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].path, ok[1].path);
        assert_ne!(ok[0].offset, ok[1].offset);
        let e = resolve_lib_calls(&parse_lib_calls("libc.so.6:getpid,libc.so.6:nosuchfn,libc.so.6:getppid").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no symbol nosuchfn"), "{e}");
        let e = resolve_lib_calls(&parse_lib_calls("libc.so.6:environ").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a function"), "{e}");
    }
}
