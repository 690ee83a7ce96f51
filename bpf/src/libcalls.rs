//! `--lib-calls`: which library functions to interpose with uprobes, found
//! the way the traced program's dynamic linker would find them.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// A [`LibCallSpec`] whose library file and symbol were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedLibCall {
    /// What the user asked for.
    pub spec: LibCallSpec,
    /// The library file the uprobes attach to (symlinks resolved).
    pub path: PathBuf,
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
    let mut out = Vec::new();
    for s in specs {
        let path = find_library(&s.library, &mut cache)?;
        match find_function(&path, &s.symbol)
            .with_context(|| format!("reading {} (for {})", path.display(), s.library))?
        {
            Sym::Function => {}
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
        }
        out.push(ResolvedLibCall { spec: s.clone(), path });
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

fn find_library(lib: &str, cache: &mut Option<Vec<(String, PathBuf)>>) -> Result<PathBuf> {
    if lib.contains('/') {
        let p = Path::new(lib);
        if !p.is_file() {
            bail!("{lib}: no such file");
        }
        return p.canonicalize().with_context(|| format!("resolving {lib}"));
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

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sym {
    Function,
    Ifunc,
    NotFunction,
    Missing,
}

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;

fn rd<const N: usize>(b: &[u8], off: usize) -> Result<[u8; N]> {
    b.get(off..off + N)
        .and_then(|s| s.try_into().ok())
        .context("truncated ELF file")
}

fn u16_at(b: &[u8], off: usize) -> Result<u16> {
    Ok(u16::from_le_bytes(rd(b, off)?))
}

fn u32_at(b: &[u8], off: usize) -> Result<u32> {
    Ok(u32::from_le_bytes(rd(b, off)?))
}

fn u64_at(b: &[u8], off: usize) -> Result<usize> {
    Ok(u64::from_le_bytes(rd(b, off)?) as usize)
}

/// Looks `name` up in the ELF64 little-endian file's `.dynsym` and `.symtab`
/// (defined symbols only).
pub(crate) fn find_function(path: &Path, name: &str) -> Result<Sym> {
    let b = std::fs::read(path)?;
    if b.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        bail!("not a 64-bit little-endian ELF file");
    }
    let shoff = u64_at(&b, 0x28)?;
    let shentsize = u16_at(&b, 0x3a)? as usize;
    let shnum = u16_at(&b, 0x3c)? as usize;
    let sh = |i: usize| shoff + i * shentsize;
    let mut best = Sym::Missing;
    for i in 0..shnum {
        let ty = u32_at(&b, sh(i) + 4)?;
        if ty != SHT_SYMTAB && ty != SHT_DYNSYM {
            continue;
        }
        let off = u64_at(&b, sh(i) + 24)?;
        let size = u64_at(&b, sh(i) + 32)?;
        let link = u32_at(&b, sh(i) + 40)? as usize;
        let entsize = u64_at(&b, sh(i) + 56)?.max(24);
        let str_off = u64_at(&b, sh(link) + 24)?;
        let str_size = u64_at(&b, sh(link) + 32)?;
        let strtab = b.get(str_off..str_off + str_size).context("truncated string table")?;
        for s in (off..off + size).step_by(entsize) {
            let st_name = u32_at(&b, s)? as usize;
            let st_info = rd::<1>(&b, s + 4)?[0];
            let st_shndx = u16_at(&b, s + 6)?;
            let Some(rest) = strtab.get(st_name..) else {
                continue;
            };
            let n = rest.split(|&c| c == 0).next().unwrap_or_default();
            if n != name.as_bytes() || st_shndx == 0 {
                continue;
            }
            match st_info & 0xf {
                STT_FUNC => return Ok(Sym::Function),
                STT_GNU_IFUNC => best = Sym::Ifunc,
                _ if best == Sym::Missing => best = Sym::NotFunction,
                _ => {}
            }
        }
    }
    Ok(best)
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
}
