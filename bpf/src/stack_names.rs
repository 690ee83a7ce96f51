//! What names the stacks later, stored while the processes live: for each
//! STACK record the consumer writes, the executable mappings of its
//! process that hold its user addresses (MAPPING, with the file's build id
//! and offset, read from `/proc/<pid>/maps`), and the kernel functions of
//! its kernel addresses (KSYM, from /proc/kallsyms). Each mapping and
//! symbol is written once. For a viewer who is not root, the maps are
//! read with their rights (`viewer.rs`), and if the kernel hides its
//! addresses from them, kernel stacks are written with stand-ins for
//! them (`hidden_kernel.rs`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use jtrace_format::{kind, Encoder, Ksym, Mapping, Payload, Record, STACK_KERNEL};
use jtrace_symbols::bounded_read::open_regular;
use jtrace_symbols::elf::build_id_in;
use jtrace_symbols::kallsyms::Kallsyms;

use crate::hidden_kernel::HiddenKernel;
use crate::viewer::ViewerReader;
use crate::Viewer;

/// One executable mapping as /proc/<pid>/maps shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MapLine {
    start: u64,
    end: u64,
    offset: u64,
    inode: u64,
    dev: String,
    path: String,
}

/// Parses every mapping of a /proc/<pid>/maps text, with whether it is executable.
fn mappings(text: &str) -> Vec<(MapLine, bool)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, char::is_whitespace);
        let (Some(range), Some(perms), Some(offset), Some(dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let exec = perms.contains('x');
        let path = it.next().unwrap_or("").trim().to_string();
        let Some((s, e)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end), Ok(offset), Ok(inode)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(offset, 16),
            inode.parse::<u64>(),
        ) else {
            continue;
        };
        out.push((
            MapLine {
                start,
                end,
                offset,
                inode,
                dev: dev.to_string(),
                path,
            },
            exec,
        ));
    }
    out
}

/// Least time between two reads of a process's maps for addresses in
/// its anonymous memory (see [`Process::anon`]), ns.
const ANON_REREAD_NS: u64 = 200_000_000;

/// A process's mappings known so far.
#[derive(Debug, Default)]
struct Process {
    /// (start, end) of every executable mapping written, sorted.
    ranges: Vec<(u64, u64)>,
    /// Mappings already written.
    written: HashSet<(u64, u64, u64, u64)>,
    /// Addresses no mapping held after a fresh read (not asked again).
    unmapped: HashSet<u64>,
    /// (start, end) of the anonymous mappings that were not executable at
    /// the last read, sorted: the JIT's reserved code cache, heaps,
    /// stacks. An address there that no executable mapping holds is JIT
    /// code committed since (anonymous: the reader names it from the
    /// JVM's own code records, not from a mapping) or not code at all (a
    /// frame-pointer walk that went astray), so it triggers a new read at
    /// most once per [`ANON_REREAD_NS`]: a JVM's code cache grows in small
    /// steps, and each step read the whole maps again (≈ 1 ms each, 100 to
    /// 300 reads in a 2 s H2 run). An address anywhere else (a library
    /// loaded since) is read at once.
    anon: Vec<(u64, u64)>,
    /// Addresses in [`Process::anon`] waiting for the next read.
    pending: HashSet<u64>,
    /// When the maps were last read (CLOCK_MONOTONIC ns; 0: never).
    read_ns: u64,
    /// The process is gone (its maps could not be read).
    gone: bool,
    /// Its last exec: stacks from before it are not named by the
    /// mappings read after it.
    exec_ts: u64,
}

impl Process {
    fn covers(&self, pc: u64) -> bool {
        in_ranges(&self.ranges, pc)
    }
}

/// Whether one of `ranges` (sorted by start, not overlapping) holds `pc`.
fn in_ranges(ranges: &[(u64, u64)], pc: u64) -> bool {
    let i = ranges.partition_point(|r| r.0 <= pc);
    i > 0 && pc < ranges[i - 1].1
}

/// The consumer's memory of what it stored, and the kernel's symbols.
#[derive(Default)]
pub(crate) struct StackNames {
    procs: HashMap<u32, Process>,
    kallsyms: Option<Option<Kallsyms>>,
    /// The kernel's symbols being read by [`StackNames::preload`]'s thread.
    loading: Option<std::thread::JoinHandle<Option<Kallsyms>>>,
    ksyms: HashSet<u64>,
    build_ids: HashMap<(String, u64), Vec<u8>>,
    /// MAPPING records written.
    pub(crate) mappings: u64,
    /// KSYM records written.
    pub(crate) symbols: u64,
    /// Reads of a /proc/<pid>/maps.
    maps_reads: u64,
    /// [`ANON_REREAD_NS`] unless set (tests: a stalled machine must not
    /// make a window pass between two calls).
    anon_reread_ns: Option<u64>,
    /// Reads the maps as the viewer (None: as root, for root).
    viewer: Option<std::io::Result<ViewerReader>>,
    /// The stand-ins for kernel addresses, if the viewer may not see them.
    hidden: Option<HiddenKernel>,
}

impl StackNames {
    /// Starts reading the kernel's symbols on a thread of their own, before
    /// recording starts: reading them takes ≈ 0.1 s of kernel time, which
    /// the consumer must not spend while short-lived processes exit
    /// unnamed, and which overlaps the loading of the BPF programs.
    pub(crate) fn preload(&mut self) {
        if self.kallsyms.is_none() && self.loading.is_none() {
            let loading = std::thread::Builder::new()
                .name("jtrace-kallsyms".into())
                .spawn(|| Kallsyms::load().ok());
            match loading {
                Ok(handle) => self.loading = Some(handle),
                Err(_) => self.kallsyms = Some(Kallsyms::load().ok()),
            }
        }
    }

    /// Has the kernel's symbols in `kallsyms`: waits for
    /// [`StackNames::preload`]'s thread, or reads them now if none started.
    fn finish_loading(&mut self) {
        if self.kallsyms.is_none() {
            let loaded = match self.loading.take() {
                Some(handle) => handle.join().ok().flatten(),
                None => Kallsyms::load().ok(),
            };
            self.kallsyms = Some(loaded);
        }
    }

    /// The trace is for `viewer`: maps are read with their rights, and
    /// kernel addresses hidden unless the kernel shows them to them.
    pub(crate) fn set_viewer(&mut self, viewer: &Viewer) {
        self.viewer = Some(ViewerReader::start(viewer));
        if !viewer.kernel_addresses {
            self.hidden = Some(HiddenKernel::default());
        }
    }

    /// `rec` without kernel addresses (or ids made of them) if the viewer
    /// may not see them and it holds any; the KSYM records that name the
    /// stand-ins of its frames go to `ksyms`.
    pub(crate) fn hide_kernel(&mut self, rec: &[u8], ksyms: &mut Encoder) -> Option<Vec<u8>> {
        self.hidden.as_ref()?;
        let flags = rec
            .get(24..28)
            .map(|f| u32::from_le_bytes(f.try_into().expect("4 bytes")));
        if is_stack(rec) && flags.is_some_and(|f| f & STACK_KERNEL != 0) {
            self.finish_loading();
        }
        let k = self.kallsyms.as_ref().and_then(Option::as_ref);
        let hidden = self.hidden.as_mut().expect("checked");
        let out = hidden.rewrite(rec, k, ksyms);
        self.symbols = hidden.functions();
        out
    }

    /// The text of /proc/`tgid`/maps, read as the viewer if there is one.
    fn read_maps(&self, tgid: u32) -> std::io::Result<String> {
        let path = format!("/proc/{tgid}/maps");
        match &self.viewer {
            None => std::fs::read_to_string(path),
            Some(Ok(reader)) => reader.read(path),
            Some(Err(e)) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }

    /// Process `tgid` called exec at `ts`: its mappings are new.
    pub(crate) fn exec(&mut self, tgid: u32, ts: u64) {
        self.procs.insert(
            tgid,
            Process {
                exec_ts: ts,
                ..Default::default()
            },
        );
    }

    /// The MAPPING and KSYM records a STACK record (its bytes) calls for,
    /// appended to `out`.
    pub(crate) fn note(&mut self, rec: &[u8], out: &mut Encoder) {
        let ts = rec
            .get(8..16)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let Some(p) = rec.get(16..32) else { return };
        let word = |i: usize| u32::from_le_bytes([p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]]);
        let (tgid, flags, n) = (word(1), word(2), word(3) as usize);
        let kernel = flags & STACK_KERNEL != 0;
        let per = if kernel { 8 } else { 16 };
        let pcs = (0..n).filter_map(|i| {
            let at = 32 + i * per;
            rec.get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        });
        if kernel {
            let pcs: Vec<u64> = pcs.collect();
            self.kernel(&pcs, out);
        } else {
            let pcs: Vec<u64> = pcs.filter(|&pc| pc != 0).collect();
            self.user(tgid, ts, &pcs, out);
        }
    }

    fn kernel(&mut self, pcs: &[u64], out: &mut Encoder) {
        // Hidden: named with their stand-ins (hide_kernel).
        if self.hidden.is_some() {
            return;
        }
        self.finish_loading();
        let Some(k) = self.kallsyms.as_ref().and_then(Option::as_ref) else {
            return;
        };
        for &pc in pcs {
            // Further from a symbol than any function is long, a pc is in
            // code kallsyms does not list (a BPF program's): not named.
            let named = k
                .lookup(pc)
                .filter(|&(start, _, _)| pc - start < crate::hidden_kernel::SLOT);
            if let Some((start, end, name)) = named {
                if self.ksyms.insert(start) {
                    self.symbols += 1;
                    out.record(&Record {
                        tid: 0,
                        ts: 0,
                        payload: Payload::Ksym(Ksym {
                            start,
                            end,
                            name: name.to_string(),
                        }),
                    });
                }
            }
        }
    }

    fn user(&mut self, tgid: u32, stack_ts: u64, pcs: &[u64], out: &mut Encoder) {
        let p = self.procs.entry(tgid).or_default();
        let known = |pc: &u64| p.covers(*pc) || p.unmapped.contains(pc) || p.pending.contains(pc);
        if p.gone || stack_ts < p.exec_ts || pcs.iter().all(known) {
            return;
        }
        let ts = now_ns();
        let fresh: Vec<u64> = pcs.iter().copied().filter(|pc| !known(pc)).collect();
        let window = self.anon_reread_ns.unwrap_or(ANON_REREAD_NS);
        if p.read_ns != 0 && ts < p.read_ns.saturating_add(window) && fresh.iter().all(|&pc| in_ranges(&p.anon, pc)) {
            p.pending.extend(fresh);
            return;
        }
        let Ok(text) = self.read_maps(tgid) else {
            self.procs.get_mut(&tgid).expect("noted").gone = true;
            return;
        };
        let p = self.procs.get_mut(&tgid).expect("noted");
        self.maps_reads += 1;
        p.read_ns = ts;
        let all = mappings(&text);
        p.anon = all
            .iter()
            .filter(|(m, exec)| !exec && m.inode == 0 && !m.path.starts_with('/'))
            .map(|(m, _)| (m.start, m.end))
            .collect();
        p.anon.sort_unstable();
        for m in all.into_iter().filter(|(_, exec)| *exec).map(|(m, _)| m) {
            let key = (m.start, m.end, m.offset, m.inode);
            if !p.written.insert(key) {
                continue;
            }
            p.ranges.push((m.start, m.end));
            let build_id = if m.inode == 0 {
                Vec::new()
            } else {
                // The mapped file itself, whatever its path says now.
                // A failed read (the process exited meanwhile) is not
                // remembered: the next process mapping the file is asked.
                let file = format!("/proc/{tgid}/map_files/{:x}-{:x}", m.start, m.end);
                let key = (m.dev.clone(), m.inode);
                match self.build_ids.get(&key) {
                    Some(id) => id.clone(),
                    None => match mapped_build_id(Path::new(&file), &m) {
                        Some(id) => self.build_ids.entry(key).or_insert(id).clone(),
                        None => Vec::new(),
                    },
                }
            };
            self.mappings += 1;
            out.record(&Record {
                tid: 0,
                ts,
                payload: Payload::Mapping(Mapping {
                    tgid,
                    start: m.start,
                    end: m.end,
                    offset: m.offset,
                    build_id,
                    path: m.path,
                }),
            });
        }
        p.ranges.sort_unstable();
        let waited: Vec<u64> = p.pending.drain().collect();
        for pc in fresh.into_iter().chain(waited) {
            if !p.covers(pc) {
                p.unmapped.insert(pc);
            }
        }
    }
}

/// The build id of the file mapped at `map_files` (a /proc/PID/map_files
/// link, opened as root), if it is the file (device and inode) of the
/// maps line `m`, which the viewer read: after an exec the same range may
/// hold another file, which no stack of theirs uses. `Some(empty)`: none.
fn mapped_build_id(map_files: &Path, m: &MapLine) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let file = open_regular(map_files).ok()?;
    let md = file.metadata().ok()?;
    let (major, minor) = m.dev.split_once(':')?;
    let (major, minor) = (
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    if md.ino() != m.inode || md.dev() != libc::makedev(major, minor) {
        return None;
    }
    Some(build_id_in(&file, map_files).ok()?.unwrap_or_default())
}

/// Whether `data` (one record) is an EXEC record: its tgid, its time,
/// and whether it leaves the process out (`EXEC_LEFT_OUT`).
pub(crate) fn exec_of(data: &[u8]) -> Option<(u32, u64, bool)> {
    if data.len() < 24 || u16::from_le_bytes([data[0], data[1]]) != kind::EXEC {
        return None;
    }
    let ts = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
    let flags = u32::from_le_bytes(data[20..24].try_into().expect("4 bytes"));
    Some((
        u32::from_le_bytes(data[16..20].try_into().expect("4 bytes")),
        ts,
        flags & jtrace_format::EXEC_LEFT_OUT != 0,
    ))
}

/// Whether `data` (one record) is a STACK record.
pub(crate) fn is_stack(data: &[u8]) -> bool {
    data.len() >= 2 && u16::from_le_bytes([data[0], data[1]]) == kind::STACK
}

/// CLOCK_MONOTONIC now, in ns.
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_mapping_and_whether_it_is_executable() {
        let all = mappings(
            "55d0a0000000-55d0a0001000 r--p 00000000 08:01 123 /usr/bin/java\n\
             55d0a0001000-55d0a0002000 r-xp 00001000 08:01 123 /usr/bin/java\n\
             7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n\
             7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0                          [vdso]\n",
        );
        assert_eq!(
            all.iter().map(|(_, x)| *x).collect::<Vec<_>>(),
            [false, true, true, true]
        );
        let m: Vec<MapLine> = all.into_iter().filter(|(_, x)| *x).map(|(m, _)| m).collect();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path, "/usr/bin/java");
        assert_eq!((m[0].start, m[0].offset, m[0].inode), (0x55d0a0001000, 0x1000, 123));
        assert_eq!(m[1].path, "");
        assert_eq!(m[2].path, "[vdso]");
    }

    /// A STACK record of this process with user frames `pcs`.
    fn own_stack(pcs: &[u64]) -> Encoder {
        let pid = std::process::id();
        let mut rec = Encoder::new();
        rec.record(&Record {
            tid: pid,
            ts: 1,
            payload: Payload::Stack(jtrace_format::Stack {
                id: 1,
                tgid: pid,
                flags: jtrace_format::STACK_USER,
                frames: pcs
                    .iter()
                    .map(|&pc| jtrace_format::StackFrame { pc, method: 0 })
                    .collect(),
            }),
        });
        rec
    }

    #[test]
    fn anonymous_memory_rereads_the_maps_at_most_once_in_a_while() {
        let mut names = StackNames {
            anon_reread_ns: Some(u64::MAX),
            ..Default::default()
        };
        let code = anonymous_memory_rereads_the_maps_at_most_once_in_a_while as *const () as usize as u64;
        names.note(&own_stack(&[code]).buf, &mut Encoder::new());
        assert_eq!(names.maps_reads, 1);
        // Words of this thread's stack and of the heap are anonymous
        // memory, not code: at most one more read for them in a while.
        let on_stack = 0u64;
        let heap = Box::new(0u64);
        let anon = [&on_stack as *const u64 as u64, &*heap as *const u64 as u64];
        let mut out = Encoder::new();
        for pc in anon {
            names.note(&own_stack(&[code, pc]).buf, &mut out);
        }
        assert_eq!(names.maps_reads, 1, "anonymous addresses wait");
        assert!(out.buf.is_empty());
        // An address in no mapping at all may be a library loaded since:
        // read at once, and what waited is settled by the same read.
        names.note(&own_stack(&[0x1000]).buf, &mut Encoder::new());
        assert_eq!(names.maps_reads, 2);
        let p = &names.procs[&std::process::id()];
        assert!(p.pending.is_empty());
        assert!(anon.iter().chain([&0x1000]).all(|pc| p.unmapped.contains(pc)));
        names.note(&own_stack(&anon).buf, &mut Encoder::new());
        assert_eq!(names.maps_reads, 2, "settled addresses are not asked again");
    }

    #[test]
    #[cfg_attr(
        not(feature = "system-tests"),
        ignore = "needs root (build ids through /proc/PID/map_files)"
    )]
    fn a_stack_of_this_process_gets_its_mappings_once() {
        let pc = a_stack_of_this_process_gets_its_mappings_once as *const () as usize as u64;
        let rec = own_stack(&[pc]);
        let mut names = StackNames::default();
        let mut out = Encoder::new();
        names.note(&rec.buf, &mut out);
        let written: Vec<Mapping> = jtrace_format::Decoder::new(&out.buf, 0)
            .filter_map(|r| match r.unwrap().payload {
                Payload::Mapping(m) => Some(m),
                _ => None,
            })
            .collect();
        let me = written
            .iter()
            .find(|m| m.start <= pc && pc < m.end)
            .expect("our code's mapping");
        assert_eq!(me.build_id.len(), 20, "{me:?}");
        let again = Encoder::new();
        let mut again = again;
        names.note(&rec.buf, &mut again);
        assert!(again.buf.is_empty());
    }
}
