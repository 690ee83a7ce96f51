//! Safepoint probes for the JVMs that appear while recording.
//!
//! At start the recorder probes the `libjvm.so` of the command's `java`,
//! or of the JDKs in the system's JVM directory ([`crate::safepoints`]). A
//! JVM started by a script from any other JDK (an unpacked tarball, a
//! build tree) would have no safepoint windows. Every traced JVM announces
//! itself to the stack walk (the agent's `jtrace_hotspot_layout` fills the
//! `jvms` map), so the consumer looks at that map between polls: a JVM
//! whose `libjvm.so` is not probed yet gets the two safepoint uprobes on
//! the very file it mapped (`/proc/<pid>/map_files/…`, whatever its path
//! says), named by PROBE_DEF records written before them.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jtrace_format::{Encoder, Payload, ProbeDef, Record};
use jtrace_symbols::hotspot::SAFEPOINT_BEGIN_SYMBOL;
use libbpf_rs::{Link, MapCore};

use crate::safepoints::probes_of;
use crate::sink::Sink;
use crate::stack_names::now_ns;
use crate::{setup, skel, ResolvedLibCall};

/// How often the consumer looks for new JVMs.
const EVERY: Duration = Duration::from_millis(250);

/// The libraries probed so far and the JVMs looked at.
pub(crate) struct LateSafepoints {
    /// `libjvm.so` files with safepoint probes (or without the symbols),
    /// by (device, inode).
    probed: HashSet<(u64, u64)>,
    /// JVMs (tgids) already looked at.
    seen: HashSet<u32>,
    /// The next probe id (cookie): ids go on from the start's.
    next_id: u32,
    last: Option<Instant>,
}

impl LateSafepoints {
    /// After the start's `probes` (the safepoint probes among them count as probed).
    pub(crate) fn new(probes: &[ResolvedLibCall]) -> LateSafepoints {
        let probed = probes
            .iter()
            .filter(|p| p.spec.symbol == SAFEPOINT_BEGIN_SYMBOL)
            .filter_map(|p| file_id(&p.file))
            .collect();
        LateSafepoints {
            probed,
            seen: HashSet::new(),
            next_id: probes.len() as u32,
            last: None,
        }
    }

    /// Probes the safepoints of the JVMs announced since the last look
    /// (at most every [`EVERY`]); their links join `links`.
    pub(crate) fn poll(&mut self, sk: &skel::JtraceSkel<'_>, links: &mut Vec<Link>, sink: &mut Sink) {
        if self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let tgids: Vec<u32> = sk
            .maps
            .jvms
            .keys()
            .filter_map(|k| Some(u32::from_ne_bytes(k.get(..4)?.try_into().ok()?)))
            .collect();
        for tgid in tgids {
            if self.seen.insert(tgid) {
                self.probe(tgid, sk, links, sink);
            }
        }
    }

    fn probe(&mut self, tgid: u32, sk: &skel::JtraceSkel<'_>, links: &mut Vec<Link>, sink: &mut Sink) {
        let Some((shown, path)) = mapped_libjvm(tgid) else {
            return;
        };
        // The mapped file, held: its symbols are read from it (within the
        // bounds of jtrace_symbols::bounded_read: the JVM's user may have
        // made it) and the uprobes attach to it.
        let Ok(file) = jtrace_symbols::bounded_read::open_regular(&path) else {
            return;
        };
        let Some(id) = file_id(&file) else { return };
        if !self.probed.insert(id) {
            return;
        }
        let calls = match probes_of(&shown, Path::new(&shown), Arc::new(file)) {
            Ok(calls) => calls,
            Err(why) => {
                eprintln!("jtrace: {why} (JVM {tgid}): its safepoints will not be recorded");
                return;
            }
        };
        // Named before any call can be recorded.
        let mut enc = Encoder::new();
        for (i, c) in calls.iter().enumerate() {
            enc.record(&Record {
                tid: 0,
                ts: now_ns(),
                payload: Payload::ProbeDef(ProbeDef {
                    probe: self.next_id + i as u32,
                    library: c.spec.library.clone(),
                    symbol: c.spec.symbol.clone(),
                }),
            });
        }
        sink.sample(&enc.buf);
        match setup::attach_lib_calls_from(sk, &calls, self.next_id) {
            Ok(new) => links.extend(new),
            Err(e) => eprintln!("jtrace: the safepoints of JVM {tgid} will not be recorded: {e:#}"),
        }
        self.next_id += calls.len() as u32;
    }
}

/// The `libjvm.so` process `tgid` maps: its path as the process sees it,
/// and the mapped file itself (`/proc/<tgid>/map_files/<range>`).
fn mapped_libjvm(tgid: u32) -> Option<(String, PathBuf)> {
    let maps = std::fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        let path = f.nth(4)?;
        path.ends_with("/libjvm.so").then(|| {
            (
                path.to_string(),
                PathBuf::from(format!("/proc/{tgid}/map_files/{range}")),
            )
        })
    })
}

/// (device, inode) of `file`.
fn file_id(file: &File) -> Option<(u64, u64)> {
    let m = file.metadata().ok()?;
    Some((m.dev(), m.ino()))
}
