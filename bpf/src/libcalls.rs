//! `--lib-calls`: which library functions to interpose with uprobes, found
//! the way the traced program's dynamic linker would find them, and read
//! with the rights of the user who named them.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

pub(crate) use jtrace_symbols::elf::{lookup_functions, lookup_functions_in, Sym};

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
#[derive(Debug, Clone)]
pub struct ResolvedLibCall {
    /// What the user asked for.
    pub spec: LibCallSpec,
    /// The library file's path (symlinks resolved), for messages.
    pub path: PathBuf,
    /// File offset of the function's first instruction, where the uprobe goes.
    pub offset: u64,
    /// The library file, open: the one whose symbols were read, and the
    /// one the uprobes attach to ([`ResolvedLibCall::attach_path`]).
    pub file: Arc<File>,
}

impl ResolvedLibCall {
    /// What the uprobes attach to: `/proc/self/fd/N` of [`ResolvedLibCall::file`],
    /// which the kernel resolves to that very file. Root never walks the
    /// library's path itself: a path the user named (and may change
    /// meanwhile) could lead root's uprobe into another file than the one
    /// whose symbols gave the offset.
    pub fn attach_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Opens a library file for reading with the rights of the user who named
/// it (the invoking user: their own open's error, so that a path they
/// cannot open reads the same whether or not a file is there); a regular
/// file only (`jtrace_symbols::bounded_read::open_regular`).
pub type OpenLibrary<'a> = &'a dyn Fn(&Path) -> Result<File>;

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

/// Finds every library, opens it with `open` (the rights of the user who
/// named it) and checks that it defines its symbol as a function, so that
/// a typo fails before anything runs. The symbols are read from the open
/// file within the bounds of `jtrace_symbols::bounded_read` (a file past
/// them is an error that says so), and the uprobes attach to that file.
pub fn resolve_lib_calls(specs: &[LibCallSpec], open: OpenLibrary<'_>) -> Result<Vec<ResolvedLibCall>> {
    let mut cache: Option<Vec<(String, PathBuf)>> = None;
    // Each library file once (by device and inode), whatever its names.
    let mut files: Vec<(PathBuf, Arc<File>)> = Vec::new();
    let mut ids: HashMap<(u64, u64), usize> = HashMap::new();
    let mut file_of = Vec::with_capacity(specs.len());
    for s in specs {
        let found = find_library(&s.library, &mut cache)?;
        let file = open(&found)?;
        let meta = file
            .metadata()
            .with_context(|| format!("reading the status of {}", found.display()))?;
        let i = *ids.entry((meta.dev(), meta.ino())).or_insert_with(|| {
            // Its path as the kernel resolved it for the user's open.
            let path = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or(found);
            files.push((path, Arc::new(file)));
            files.len() - 1
        });
        file_of.push(i);
    }
    // One pass over each library's symbol tables (libjvm.so has ~50k).
    let mut found: Vec<Vec<Sym>> = Vec::with_capacity(files.len());
    for (i, (path, file)) in files.iter().enumerate() {
        let names: Vec<&str> = specs
            .iter()
            .zip(&file_of)
            .filter(|(_, &f)| f == i)
            .map(|(s, _)| s.symbol.as_str())
            .collect();
        let first = &specs[file_of.iter().position(|&f| f == i).expect("a spec per file")];
        let syms = lookup_functions_in(file, path, &names).with_context(|| format!("--lib-calls {}", first.library))?;
        found.push(syms);
    }
    let mut next = vec![0usize; files.len()];
    let mut out = Vec::new();
    for (s, &i) in specs.iter().zip(&file_of) {
        let (path, file) = &files[i];
        let sym = found[i][next[i]];
        next[i] += 1;
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
            file: file.clone(),
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

/// The file of library `lib`: a path as it is (opened as the user who
/// named it: root neither looks at nor resolves it), a file name as the
/// dynamic linker finds it, in the linker cache and the system's library
/// directories (root's own, which every user can list).
fn find_library(lib: &str, cache: &mut Option<Vec<(String, PathBuf)>>) -> Result<PathBuf> {
    if lib.contains('/') {
        return Ok(PathBuf::from(lib));
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

    /// This process's own rights, as the tests have no other user.
    fn open(p: &Path) -> Result<File> {
        jtrace_symbols::bounded_read::open_regular(p).with_context(|| format!("cannot open {}", p.display()))
    }

    fn resolve(spec: &str) -> Result<Vec<ResolvedLibCall>> {
        resolve_lib_calls(&parse_lib_calls(spec).unwrap(), &open)
    }

    #[test]
    fn resolves_libc_functions_and_rejects_bad_ones() {
        let ok = resolve("libc.so.6:getpid").unwrap();
        assert!(ok[0].path.is_file());
        // The uprobes' path is the open file itself.
        let (a, b) = (
            std::fs::metadata(ok[0].attach_path()).unwrap(),
            std::fs::metadata(&ok[0].path).unwrap(),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
        let e = resolve("libc.so.6:getpidx").unwrap_err().to_string();
        assert!(e.contains("has no symbol getpidx"), "{e}");
        let e = resolve("libnosuch.so.9:f").unwrap_err().to_string();
        assert!(e.contains("libnosuch.so.9: not found in the linker cache"), "{e}");
        let e = resolve("libc.so.6:strlen").unwrap_err().to_string();
        assert!(e.contains("IFUNC"), "{e}");
        // A path is opened by the opener, whose error is the answer.
        let e = format!("{:#}", resolve("/nonexistent/libx.so:f").unwrap_err());
        assert!(e.contains("cannot open /nonexistent/libx.so: No such file"), "{e}");
        let e = format!("{:#}", resolve("/dev/zero:f").unwrap_err());
        assert!(e.contains("cannot open /dev/zero: not a regular file"), "{e}");
    }

    /// Several symbols of one library are looked up in one pass, each
    /// answered for itself.
    #[test]
    fn symbols_of_one_library_are_told_apart() {
        let ok = resolve("libc.so.6:getpid,libc.so.6:getppid").unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0].path, ok[1].path);
        assert_eq!(ok[0].attach_path(), ok[1].attach_path(), "one file, opened once");
        assert_ne!(ok[0].offset, ok[1].offset);
        let e = resolve("libc.so.6:getpid,libc.so.6:nosuchfn,libc.so.6:getppid")
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no symbol nosuchfn"), "{e}");
        let e = resolve("libc.so.6:environ").unwrap_err().to_string();
        assert!(e.contains("is not a function"), "{e}");
    }
}
