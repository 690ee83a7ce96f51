//! Records real processes with the real kernel programs and checks the
//! stream with the format crate's decoder. Needs root (or CAP_BPF +
//! CAP_PERFMON); CI runs these as root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use jtrace_bpf::{KernelRecorder, KernelStats, RecorderConfig, DEFAULT_RINGBUF_BYTES, PREV_TID_UNKNOWN};
use jtrace_format::{comm_str, kind, Decoder, FileHeader, Payload, Record, FILE_HEADER_LEN, KERNEL_MAGIC};

/// Every recorder traces the children of this process, so tests that record
/// must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("jtrace-bpf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The scheduler's records alone: these tests check their semantics;
/// stacks have a test of their own (`stacks_are_defined_and_named`).
fn config(dir: &TempDir) -> RecorderConfig {
    let mut cfg = RecorderConfig::create(dir.0.join("kernel.bin")).unwrap();
    cfg.launcher_tgid = Some(std::process::id());
    cfg.stacks = false;
    cfg
}

/// Decodes the whole stream, failing on any malformed byte.
fn decode(dir: &TempDir) -> Vec<Record> {
    let data = std::fs::read(dir.0.join("kernel.bin")).unwrap();
    assert_eq!(FileHeader::parse(&data), Some(FileHeader::new(KERNEL_MAGIC)));
    Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .map(|r| r.unwrap())
        .collect()
}

/// The process of a scheduler record; `None` for the kinds that carry no
/// tgid (syscalls, faults, block I/O, library calls).
fn tgid(r: &Record) -> Option<u32> {
    match &r.payload {
        Payload::SwitchOut(p) => Some(p.tgid),
        Payload::SwitchIn(p) => Some(p.tgid),
        Payload::Wakeup(p) => Some(p.tgid),
        Payload::Fork(p) => Some(p.tgid),
        Payload::Exit(p) | Payload::Comm(p) | Payload::Exec(p) => Some(p.tgid),
        Payload::TaskNs(p) => Some(p.tgid),
        Payload::Syscall(_) | Payload::PageFault(_) | Payload::BlockIo(_) | Payload::LibCall(_) => None,
        Payload::Throttle(_) | Payload::Steal(_) => None,
        Payload::ProbeDef(_) => None,
        other => panic!("not a kernel record: {other:?}"),
    }
}

fn kind_of(p: &Payload) -> u16 {
    match p {
        Payload::SwitchOut(_) => kind::SWITCH_OUT,
        Payload::SwitchIn(_) => kind::SWITCH_IN,
        Payload::Wakeup(_) => kind::WAKEUP,
        Payload::Fork(_) => kind::FORK,
        Payload::Exit(_) => kind::EXIT,
        Payload::Comm(_) => kind::COMM,
        Payload::Exec(_) => kind::EXEC,
        Payload::Syscall(_) => kind::SYSCALL,
        Payload::PageFault(_) => kind::PAGE_FAULT,
        Payload::BlockIo(_) => kind::BLOCK_IO,
        Payload::LibCall(_) => kind::LIB_CALL,
        Payload::ProbeDef(_) => kind::PROBE_DEF,
        Payload::TaskNs(_) => kind::TASK_NS,
        Payload::Throttle(_) => kind::THROTTLE,
        Payload::Steal(_) => kind::STEAL,
        other => panic!("not a kernel record: {other:?}"),
    }
}

/// Checks what must hold for every recording: the filter keeps this process
/// out, counters agree with the file, each thread is named before its first
/// switch, and switch-outs and switch-ins alternate per thread.
fn check_common(recs: &[Record], stats: &KernelStats) -> Vec<Record> {
    let me = std::process::id();
    assert!(
        recs.iter().all(|r| tgid(r) != Some(me)),
        "records of the launcher itself"
    );
    // Threads of this process never appear, whatever the kind.
    let my_tids: BTreeSet<u32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert!(
        recs.iter().all(|r| !my_tids.contains(&r.tid)),
        "records of the launcher's threads"
    );
    assert_eq!(stats.lost_total, 0, "losses: {stats:?}");
    assert_eq!(stats.records, recs.len() as u64);
    assert_eq!(
        stats.emitted.values().sum::<u64>() + stats.probe_defs + stats.file_paths,
        stats.records,
        "{stats:?}"
    );

    // Switch-ins the tracepoint did not report (see KernelStats docs) are
    // inferred, marked and counted.
    let inferred = recs
        .iter()
        .filter(|r| matches!(&r.payload, Payload::SwitchIn(s) if s.prev_tid == PREV_TID_UNKNOWN))
        .count();
    assert_eq!(inferred as u64, stats.inferred_switch_ins);

    let mut sorted = recs.to_vec();
    sorted.sort_by_key(|r| r.ts);
    let mut per_tid: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in &sorted {
        per_tid.entry(r.tid).or_default().push(r);
    }
    for (tid, rs) in &per_tid {
        let switches: Vec<u16> = rs
            .iter()
            .map(|r| kind_of(&r.payload))
            .filter(|&k| k == kind::SWITCH_OUT || k == kind::SWITCH_IN)
            .collect();
        for w in switches.windows(2) {
            assert_ne!(w[0], w[1], "tid {tid}: switches do not alternate: {rs:#?}");
        }
        if let Some(first) = rs
            .iter()
            .position(|r| matches!(r.payload, Payload::SwitchOut(_) | Payload::SwitchIn(_)))
        {
            assert!(
                rs[..first].iter().any(|r| matches!(r.payload, Payload::Comm(_))),
                "tid {tid}: no COMM before its first switch"
            );
        }
        // A thread is named once: never again after its EXIT (its last
        // switch-out, which comes after, must not look like a new thread).
        if let Some(exit) = rs.iter().position(|r| matches!(r.payload, Payload::Exit(_))) {
            assert!(
                !rs[exit..].iter().any(|r| matches!(r.payload, Payload::Comm(_))),
                "tid {tid}: COMM after its EXIT: {rs:#?}"
            );
        }
    }
    sorted
}

#[test]
fn records_sleep_wakeup_and_filters_launcher() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("sleep");
    let rec = KernelRecorder::start(config(&dir)).expect("start recorder");
    let status = Command::new("/bin/sh")
        .args(["-c", "sleep 0.05; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
        .status()
        .unwrap();
    assert!(status.success());
    let stats = rec.stop().expect("stop recorder");
    let recs = decode(&dir);
    let sorted = check_common(&recs, &stats);

    // The shell (a new process of the launcher) and the sleep it forked.
    let tgids: BTreeSet<u32> = recs.iter().filter_map(tgid).collect();
    assert!(tgids.len() >= 2, "expected sh and sleep, got tgids {tgids:?}");
    let comms: BTreeSet<String> = recs
        .iter()
        .filter_map(|r| match &r.payload {
            Payload::Comm(t) => Some(comm_str(&t.comm)),
            _ => None,
        })
        .collect();
    assert!(comms.contains("sh") || comms.contains("sleep"), "COMM names: {comms:?}");
    let sleep_tgid = recs
        .iter()
        .find_map(|r| match &r.payload {
            Payload::Exec(t) if comm_str(&t.comm) == "sleep" => Some(t.tgid),
            _ => None,
        })
        .expect("EXEC of sleep");
    assert!(recs.iter().any(|r| matches!(&r.payload,
        Payload::Fork(f) if f.tgid == sleep_tgid && tgids.contains(&f.parent_tgid))));
    assert!(recs
        .iter()
        .any(|r| matches!(&r.payload, Payload::Exit(t) if t.tgid == sleep_tgid)));

    // The 50 ms nanosleep: a voluntary switch-out, the timer's wakeup about
    // 50 ms later, then a switch-in.
    let sleep_events: Vec<&Record> = sorted
        .iter()
        .filter(|r| tgid(r) == Some(sleep_tgid))
        .filter(|r| {
            matches!(
                r.payload,
                Payload::SwitchOut(_) | Payload::SwitchIn(_) | Payload::Wakeup(_)
            )
        })
        .collect();
    let blocked: Vec<u64> = sleep_events
        .windows(3)
        .filter_map(|w| match (&w[0].payload, &w[1].payload, &w[2].payload) {
            (Payload::SwitchOut(o), Payload::Wakeup(wk), Payload::SwitchIn(_))
                if o.prev_state != 0 && wk.new_task == 0 && w[0].tid == w[1].tid && w[1].tid == w[2].tid =>
            {
                Some(w[1].ts - w[0].ts)
            }
            _ => None,
        })
        .collect();
    assert!(
        blocked.iter().any(|&ns| (45_000_000..=55_000_000).contains(&ns)),
        "no ~50 ms blocked interval of sleep: {blocked:?}"
    );
}

/// The kernel's `TASK_DEAD` state bit: a thread's last switch-out.
const TASK_DEAD: u32 = 0x80;

/// A process's threads exit, the launcher reaps it and stops at once: every
/// thread's last switch-out, which the kernel makes after the process can
/// be reaped, is still in the stream (the tracepoints settle while the
/// uprobes detach).
#[test]
fn the_last_switches_of_a_reaped_process_are_recorded() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("reaped");
    let rec = KernelRecorder::start(config(&dir)).expect("start recorder");
    // Eight processes that exit as soon as they start, and their shell.
    let status = Command::new("/bin/sh")
        .args(["-c", "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait"])
        .status()
        .unwrap();
    assert!(status.success());
    let stats = rec
        .stop_after(std::time::Duration::from_millis(20))
        .expect("stop recorder");
    let recs = decode(&dir);
    let sorted = check_common(&recs, &stats);
    let exited: BTreeSet<u32> = sorted
        .iter()
        .filter(|r| matches!(r.payload, Payload::Exit(_)))
        .map(|r| r.tid)
        .collect();
    assert!(exited.len() >= 9, "EXIT records of sh and its children: {exited:?}");
    for tid in &exited {
        let last = sorted
            .iter()
            .rev()
            .find_map(|r| match &r.payload {
                Payload::SwitchOut(o) if r.tid == *tid => Some((r.ts, o.prev_state)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("tid {tid}: no switch-out at all"));
        assert!(
            last.1 & TASK_DEAD != 0,
            "tid {tid}: its last switch-out is not its dying one: {last:?}"
        );
    }
}

#[test]
fn records_preemption_of_pinned_spinners() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("preempt");
    let rec = KernelRecorder::start(config(&dir)).expect("start recorder");
    let spin = || {
        Command::new("taskset")
            .args(["-c", "0", "timeout", "0.2", "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset")
    };
    let (mut a, mut b) = (spin(), spin());
    // timeout exits with 124 after killing the spinner.
    a.wait().unwrap();
    b.wait().unwrap();
    let stats = rec.stop().expect("stop recorder");
    let recs = decode(&dir);
    check_common(&recs, &stats);

    let spinners: BTreeSet<u32> = recs
        .iter()
        .filter_map(|r| match &r.payload {
            Payload::Exec(t) if comm_str(&t.comm) == "sh" => Some(t.tgid),
            _ => None,
        })
        .collect();
    assert_eq!(spinners.len(), 2, "EXEC of two spinning shells");
    let preempted: Vec<&Record> = recs
        .iter()
        .filter(|r| {
            matches!(&r.payload, Payload::SwitchOut(o)
                if o.prev_state == jtrace_format::TASK_RUNNING && spinners.contains(&o.tgid))
        })
        .collect();
    assert!(!preempted.is_empty(), "no preemption of the spinners recorded");
    assert!(preempted
        .iter()
        .all(|r| matches!(&r.payload, Payload::SwitchOut(o) if o.cpu == 0)));
}

#[test]
fn traces_running_pid_but_not_launcher_threads() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("pids");
    // Already running before the recorder starts: traced only through `pids`.
    let mut child = Command::new("sh")
        .args(["-c", "read x; sleep 0.02; true"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut cfg = RecorderConfig::create(dir.0.join("kernel.bin")).unwrap();
    cfg.pids = vec![child.id()];
    cfg.ringbuf_bytes = 1 << 16;
    cfg.stacks = false;
    let rec = KernelRecorder::start(cfg).expect("start recorder");
    // A thread of this process: must not be traced (no launcher_tgid here,
    // and never a new thread of the launcher anyway).
    std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(5)))
        .join()
        .unwrap();
    drop(child.stdin.take()); // EOF ends the `read`
    child.wait().unwrap();
    let stats = rec.stop().expect("stop recorder");
    let recs = decode(&dir);
    check_common(&recs, &stats);
    let pid = child.id();
    assert!(recs
        .iter()
        .any(|r| r.tid == pid && matches!(r.payload, Payload::Comm(_))));
    assert!(recs
        .iter()
        .any(|r| r.tid == pid && matches!(r.payload, Payload::SwitchIn(_))));
    // Its child `sleep` joined through the process tree.
    assert!(recs.iter().any(|r| matches!(&r.payload,
        Payload::Exec(t) if comm_str(&t.comm) == "sleep" && t.tgid != pid)));
}

/// With stacks on: every stack id a SWITCH_OUT carries is defined by an
/// earlier STACK record, every kernel pc is in a KSYM, every user stack's
/// pc is in a MAPPING of its process, and a blocked sleep's kernel stack
/// goes through schedule().
#[test]
fn stacks_are_defined_and_named() {
    // Stacks at every switch-out, then deferred stacks (the default).
    stacks_defined_and_named(None);
    stacks_defined_and_named(Some(jtrace_bpf::DEFAULT_STACK_MIN_BLOCK_NS));
}

/// With deferred stacks (`min_block` set), the 50 ms sleep's block gets a
/// BLOCK_STACK with its kernel and user stacks, taken after it.
fn stacks_defined_and_named(min_block: Option<u64>) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("stacks");
    let mut cfg = config(&dir);
    cfg.stacks = true;
    cfg.stack_min_block_ns = min_block;
    let rec = KernelRecorder::start(cfg).expect("start recorder");
    // Twice: a deferred stack comes at the block's end, and the recorder
    // reads the mappings of a process while it lives (see below).
    let status = Command::new("/bin/sh")
        .args(["-c", "sleep 0.05; sleep 0.05"])
        .status()
        .unwrap();
    assert!(status.success());
    let stats = rec.stop().expect("stop recorder");
    let data = std::fs::read(dir.0.join("kernel.bin")).unwrap();
    let recs: Vec<Record> = Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .map(|r| r.unwrap())
        .collect();
    assert!(stats.emitted["stack"] > 0, "{stats:?}");
    let (mut defined, mut ksyms, mut maps) = (BTreeSet::new(), Vec::new(), Vec::new());
    let mut kernel_pcs = Vec::new();
    let mut user = Vec::new();
    let mut outs = 0;
    let mut blocks = Vec::new();
    for r in &recs {
        match &r.payload {
            Payload::Stack(s) => {
                assert!(defined.insert(s.id), "stack id {} defined twice", s.id);
                if s.is_kernel() {
                    kernel_pcs.extend(s.frames.iter().map(|f| f.pc));
                } else {
                    user.push((r.ts, s.clone()));
                }
            }
            Payload::SwitchOutStacks(..) if min_block.is_some() => panic!("stack ids in a SWITCH_OUT"),
            Payload::BlockStack(b) => {
                assert!(min_block.is_some(), "a BLOCK_STACK with stacks at every switch-out");
                for id in [b.kstack, b.ustack].into_iter().filter(|&i| i != 0) {
                    assert!(defined.contains(&id), "stack {id} used before its STACK record");
                }
                assert!(b.out_ts < r.ts);
                blocks.push((r.ts, r.tid, *b));
            }
            Payload::SwitchOut(_) if min_block.is_some() => outs += 1,
            Payload::SwitchOutStacks(_, st) => {
                outs += 1;
                for id in [st.kstack, st.ustack].into_iter().filter(|&i| i != 0) {
                    assert!(defined.contains(&id), "stack {id} used before its STACK record");
                }
            }
            Payload::SwitchOut(_) => panic!("a SWITCH_OUT without stacks"),
            Payload::Ksym(k) => ksyms.push(k.clone()),
            Payload::Mapping(m) => maps.push(m.clone()),
            _ => {}
        }
    }
    assert!(outs > 0);
    // Every pc is named, but one in code kallsyms did not list when the
    // recorder read it (a BPF program of its own, loaded after): 16 MiB
    // or more past the symbol before it, or in a BPF program now.
    let kallsyms = jtrace_symbols::kallsyms::Kallsyms::load().unwrap();
    for pc in &kernel_pcs {
        let unlisted = kallsyms
            .lookup(*pc)
            .is_none_or(|(start, _, name)| pc - start >= 1 << 24 || name.ends_with("[bpf]"));
        assert!(
            unlisted || ksyms.iter().any(|k| k.start <= *pc && *pc < k.end),
            "kernel pc {pc:#x} in no KSYM"
        );
    }
    // Taken at the switch-out, the stack holds schedule(); taken from the
    // task off CPU (bpf_get_task_stack), the kernel leaves the scheduler's
    // functions out: it begins where the sleep waits.
    let waits = if min_block.is_some() {
        "hrtimer_nanosleep"
    } else {
        "schedule"
    };
    assert!(
        ksyms.iter().any(|k| k.name == waits),
        "no {waits}() in the kernel stacks: {:?}",
        (kernel_pcs.iter())
            .filter_map(|pc| ksyms.iter().find(|k| k.start <= *pc && *pc < k.end))
            .map(|k| k.name.as_str())
            .collect::<BTreeSet<_>>()
    );
    // A process's stacks are named by the mappings the recorder reads while
    // it lives (a stack from before an exec is not named by the mappings
    // after it). Taken at the switch-out, the first `sleep`'s stack leaves
    // it 50 ms to read them; taken at the block's end, the sleep exits
    // right after, but the shell's first wait ends 50 ms before its last.
    let exec_of = |comm: &str| {
        recs.iter()
            .find_map(|r| match &r.payload {
                Payload::Exec(t) if comm_str(&t.comm) == comm => Some((t.tgid, r.ts)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("EXEC of {comm}"))
    };
    let (sleep_tgid, _) = exec_of("sleep");
    let (tgid, exec_ts) = exec_of(if min_block.is_some() { "sh" } else { "sleep" });
    let after: Vec<&(u64, jtrace_format::Stack)> = user
        .iter()
        .filter(|(ts, s)| s.tgid == tgid && *ts > exec_ts)
        .take(if min_block.is_some() { 1 } else { usize::MAX })
        .collect();
    assert!(!after.is_empty(), "no user stack of {tgid} after its exec");
    for (_, s) in after {
        let leaf = s.frames[0].pc;
        assert!(
            maps.iter().any(|m| m.tgid == s.tgid && m.start <= leaf && leaf < m.end),
            "user pc {leaf:#x} of {} in no MAPPING: {:?} {:?}",
            s.tgid,
            s,
            maps.iter().filter(|m| m.tgid == s.tgid).collect::<Vec<_>>()
        );
    }
    assert!(maps
        .iter()
        .any(|m| m.path.ends_with("libc.so.6") && m.build_id.len() == 20));
    if min_block.is_some() {
        let slept = blocks
            .iter()
            .find(|(ts, _, b)| b.tgid == sleep_tgid && ts - b.out_ts >= 40_000_000)
            .unwrap_or_else(|| panic!("no BLOCK_STACK of the 50 ms sleep: {blocks:?}"));
        assert!(slept.2.kstack != 0 && slept.2.ustack != 0, "{slept:?}");
        assert_eq!(slept.2.flags, 0, "{slept:?}");
    }
}

#[test]
fn rejects_bad_configuration() {
    let dir = TempDir::new("bad");
    let mut cfg = RecorderConfig::create(dir.0.join("kernel.bin")).unwrap();
    cfg.ringbuf_bytes = 3 << 20;
    let e = KernelRecorder::start(cfg).unwrap_err().to_string();
    assert!(e.contains("power of two"), "{e}");

    let mut cfg = RecorderConfig::create(dir.0.join("kernel.bin")).unwrap();
    cfg.pids = vec![u32::MAX - 1];
    let e = format!("{:#}", KernelRecorder::start(cfg).unwrap_err());
    assert!(e.contains("no such process"), "{e}");

    let e = format!(
        "{:#}",
        RecorderConfig::create(dir.0.join("no/such/dir/kernel.bin")).unwrap_err()
    );
    assert!(e.contains("no/such/dir"), "{e}");

    let cfg = RecorderConfig::create(dir.0.join("kernel.bin")).unwrap();
    assert_eq!(cfg.ringbuf_bytes, DEFAULT_RINGBUF_BYTES);
    jtrace_bpf::required_kernel_features().unwrap();
}

#[test]
fn stream_is_readable_while_recording() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("live");
    let rec = KernelRecorder::start(config(&dir)).expect("start recorder");
    let status = Command::new("/bin/sh")
        .args(["-c", "sleep 0.01; true"])
        .status()
        .unwrap();
    assert!(status.success());
    // Longer than the poll timeout plus the flush period: what a killed
    // jtrace would leave behind.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let live = decode(&dir);
    assert!(live.iter().any(|r| matches!(&r.payload,
        Payload::Exec(t) if comm_str(&t.comm) == "sleep")));
    let stats = rec.stop().expect("stop recorder");
    assert!(decode(&dir).len() >= live.len());
    assert_eq!(stats.lost_total, 0);
}

/// Compiles bench/pingpong.c (two threads handing a byte back and forth
/// over pipes) into `dir`.
fn pingpong_bin(dir: &TempDir) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/pingpong.c");
    let bin = dir.0.join("pingpong");
    let st = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("running cc");
    assert!(st.success(), "cc {}", src.display());
    bin
}

/// Both threads of a ping-pong on one CPU: every switch writes its records
/// as one batch (SYSCALL, SWITCH_OUT, SWITCH_IN), and a wakeup of a thread
/// that last ran on the waker's CPU waits for that CPU's next switch. Checks
/// that nothing is lost or misplaced by either: each thread that blocked
/// comes back only after a WAKEUP from the other thread, written before its
/// SWITCH_IN in the file, and each of its blocks has its SYSCALL record
/// (read on a pipe) just before the SWITCH_OUT.
#[test]
fn pinned_ping_pong_has_every_wakeup_and_blocked_syscall_in_order() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("pingpong");
    let bin = pingpong_bin(&dir);
    let trips = 3000;
    let rec = KernelRecorder::start(config(&dir)).expect("start recorder");
    let out = Command::new("taskset")
        .args(["-c", "0"])
        .arg(&bin)
        .arg(trips.to_string())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = rec.stop().expect("stop recorder");
    let recs = decode(&dir);
    check_common(&recs, &stats);

    let pp_tgid = recs
        .iter()
        .find_map(|r| match &r.payload {
            Payload::Exec(t) if comm_str(&t.comm) == "pingpong" => Some(t.tgid),
            _ => None,
        })
        .expect("EXEC of pingpong");
    let tids: BTreeSet<u32> = recs
        .iter()
        .filter(|r| tgid(r) == Some(pp_tgid))
        .map(|r| r.tid)
        .collect();
    assert_eq!(tids.len(), 2, "two threads: {tids:?}");
    let mut blocks = 0;
    for &tid in &tids {
        let other = *tids.iter().find(|&&t| t != tid).unwrap();
        // File order, not time order: on one CPU the two are the same.
        let mine: Vec<(usize, &Record)> = recs.iter().enumerate().filter(|(_, r)| r.tid == tid).collect();
        let mut waiting_since: Option<u64> = None;
        let mut woken = false;
        for (k, &(i, r)) in mine.iter().enumerate() {
            match &r.payload {
                Payload::SwitchOut(o) if o.prev_state != 0 => {
                    // A pipe read blocks: its SYSCALL is the record just before.
                    let prev = k.checked_sub(1).map(|k| mine[k].1);
                    let sc = match prev.map(|p| &p.payload) {
                        Some(Payload::Syscall(sc)) if prev.unwrap().ts == r.ts => sc,
                        _ => continue, // thread start-up and exit: not the pipe
                    };
                    if sc.nr == 0 && sc.fd_kind == jtrace_format::fd_kind::PIPE {
                        assert_eq!(recs[i - 1].ts, r.ts, "SYSCALL not next to its SWITCH_OUT");
                        waiting_since = Some(r.ts);
                        woken = false;
                        blocks += 1;
                    }
                }
                Payload::Wakeup(w) if waiting_since.is_some() => {
                    assert!(r.ts >= waiting_since.unwrap());
                    assert_eq!(w.waker_tid, other, "tid {tid} woken by {}", w.waker_tid);
                    woken = true;
                }
                Payload::SwitchIn(_) if waiting_since.is_some() => {
                    assert!(
                        woken,
                        "tid {tid}: switched in at {} with no WAKEUP since its block",
                        r.ts
                    );
                    waiting_since = None;
                }
                _ => {}
            }
        }
    }
    // Most hops block in read (some are preempted by the wakee first).
    assert!(blocks >= trips, "{blocks} blocked reads for {trips} round trips");
    assert_eq!(stats.lost_total, 0);
}
