//! End-to-end tests of the kernel events beyond the scheduler: syscalls
//! with their fd resolved in the kernel, blocking page faults, block I/O,
//! futex wakers, interposed library calls, and `jtrace record -p`. Small C
//! programs with known behaviour are compiled at test time and run under
//! `jtrace run` (root, real kernel, as in CI).

mod common;

use common::*;
use jtrace_format::{fd_kind, Decoder, Payload, Record, Syscall, FILE_HEADER_LEN, SYSCALL_AT_SWITCH, SYSCALL_BLOCKED};
use jtrace_merge::Meta;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MS: u64 = 1_000_000;

/// x86-64 syscall numbers.
const NR_READ: u32 = 0;
const NR_RECVFROM: u32 = 45;
const NR_NANOSLEEP: u32 = 35;
const NR_CLOCK_NANOSLEEP: u32 = 230;
const NR_FUTEX: u32 = 202;
const NR_WRITE: u32 = 1;
const NR_FSYNC: u32 = 74;
const NR_OPENAT: u32 = 257;
const NR_PREAD64: u32 = 17;

/// Compiles one C program into `dir`.
fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&bin)
        .arg(&c)
        .status()
        .expect("run cc");
    assert!(st.success(), "compiling {name}.c failed");
    bin
}

fn records(trace: &Path) -> Vec<Record> {
    let data = std::fs::read(trace.join("kernel.bin")).unwrap();
    Decoder::new(&data[FILE_HEADER_LEN..], FILE_HEADER_LEN)
        .map(|r| r.unwrap())
        .collect()
}

fn syscalls(recs: &[Record], tid: u32) -> Vec<(u64, Syscall)> {
    recs.iter()
        .filter(|r| r.tid == tid)
        .filter_map(|r| match &r.payload {
            Payload::Syscall(s) => Some((r.ts, *s)),
            _ => None,
        })
        .collect()
}

/// The full records (written at the syscall's exit, modes io and all).
/// The first wakeup of `tid` after `after`, by time (kernel.bin is in the
/// order records left the per-CPU buffers, so a wakeup recorded on another
/// CPU may come after later records of the thread): its time and waker.
fn first_wakeup_after(recs: &[Record], tid: u32, after: u64) -> Option<(u64, u32)> {
    recs.iter()
        .filter_map(|r| match &r.payload {
            Payload::Wakeup(w) if r.tid == tid && r.ts > after => Some((r.ts, w.waker_tid)),
            _ => None,
        })
        .min()
}

fn full_syscalls(recs: &[Record], tid: u32) -> Vec<(u64, Syscall)> {
    syscalls(recs, tid)
        .into_iter()
        .filter(|(_, s)| s.flags & SYSCALL_AT_SWITCH == 0)
        .collect()
}

/// The records written at a switch-out inside a syscall (every mode but
/// none), each with the length of the block it explains: from its ts (the
/// switch-out) to the thread's next SWITCH_IN.
fn at_switch_blocks(recs: &[Record], tid: u32) -> Vec<(u64, u64, Syscall)> {
    let ins: Vec<u64> = recs
        .iter()
        .filter(|r| r.tid == tid && matches!(r.payload, Payload::SwitchIn(_)))
        .map(|r| r.ts)
        .collect();
    syscalls(recs, tid)
        .into_iter()
        .filter(|(_, s)| s.flags & SYSCALL_AT_SWITCH != 0)
        .map(|(ts, s)| {
            assert_eq!(s.flags, SYSCALL_AT_SWITCH | SYSCALL_BLOCKED, "{s:?}");
            assert_eq!((s.exit_ts, s.ret), (0, 0), "{s:?}");
            let back = ins
                .iter()
                .copied()
                .filter(|&t| t >= ts)
                .min()
                .unwrap_or_else(|| panic!("no switch-in after the block at {ts}: {s:?}"));
            (ts, back - ts, s)
        })
        .collect()
}

/// `key=value` pairs the test programs print.
fn field(out: &str, key: &str) -> u64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {out:?}"))
        .parse()
        .unwrap()
}

fn run_ok(trace: &Path, args: &[&str], cmd: &[&str]) -> String {
    let o = jtrace_run(trace, args, cmd);
    assert!(o.status.success(), "jtrace run failed");
    let meta = Meta::load(trace).unwrap();
    assert!(meta.complete);
    assert_eq!(meta.kernel_lost_total(), 0, "{:?}", meta.kernel_lost);
    String::from_utf8(o.stdout).unwrap()
}

const SLEEP_C: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, 0);
    printf("tid=%d\n", gettid());
    return 0;
}
"#;

#[test]
fn nanosleep_is_one_blocked_syscall_of_50_ms() {
    let _g = one_at_a_time();
    let dir = tempdir("ksleep");
    let bin = cc(&dir, "sleep50", SLEEP_C);
    let is_sleep = |s: &Syscall| s.nr == NR_NANOSLEEP || s.nr == NR_CLOCK_NANOSLEEP;
    // Default mode (blocked): one record, written at the switch-out, and
    // no syscall hook, so no full record.
    let trace = dir.join("t");
    let out = run_ok(&trace, &[], &[bin.to_str().unwrap()]);
    let tid = field(&out, "tid") as u32;
    let recs = records(&trace);
    assert!(full_syscalls(&recs, tid).is_empty(), "{:?}", full_syscalls(&recs, tid));
    let blocks: Vec<_> = at_switch_blocks(&recs, tid)
        .into_iter()
        .filter(|(_, _, s)| is_sleep(s))
        .collect();
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    let (out_ts, d, s) = blocks[0];
    // Blocked until the timer's wakeup; back on CPU after any run-queue wait.
    let (woken, _) = first_wakeup_after(&recs, tid, out_ts).expect("the wakeup ending the sleep");
    assert!(
        (48 * MS..=52 * MS).contains(&(woken - out_ts)),
        "blocked {} ns",
        woken - out_ts
    );
    assert!(d >= woken - out_ts);
    assert_eq!(s.arg, 50 * MS, "requested sleep in arg");

    // --syscalls io: the same block record, plus the full record at exit.
    let trace = dir.join("t-io");
    let out = run_ok(&trace, &["--syscalls", "io"], &[bin.to_str().unwrap()]);
    let tid = field(&out, "tid") as u32;
    let recs = records(&trace);
    let blocks = at_switch_blocks(&recs, tid);
    assert_eq!(blocks.iter().filter(|(_, _, s)| is_sleep(s)).count(), 1, "{blocks:?}");
    let sleeps: Vec<_> = full_syscalls(&recs, tid)
        .into_iter()
        .filter(|(_, s)| is_sleep(s))
        .collect();
    assert_eq!(sleeps.len(), 1, "{sleeps:?}");
    let (entry, s) = sleeps[0];
    // Asleep from entry to the timer's wakeup; the exit comes after any
    // run-queue wait, which a loaded machine makes long.
    let (woken, _) = first_wakeup_after(&recs, tid, entry).expect("the wakeup ending the sleep");
    let d = woken - entry;
    assert!((48 * MS..=52 * MS).contains(&d), "nanosleep slept {d} ns");
    assert!(s.exit_ts >= woken);
    assert_eq!(s.flags & SYSCALL_BLOCKED, SYSCALL_BLOCKED);
    assert_eq!(s.ret, 0);
    assert_eq!(s.arg, 50 * MS, "requested sleep in arg");
}

const SOCK_C: &str = r#"
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static int lfd;
static void *server(void *a) {
    int c = accept(lfd, 0, 0);
    struct timespec ts = {0, 40 * 1000 * 1000};
    nanosleep(&ts, 0);
    write(c, "hello", 5);
    close(c);
    return 0;
}
int main(void) {
    struct sockaddr_in sa = {0};
    socklen_t len = sizeof sa;
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    bind(lfd, (void *)&sa, sizeof sa);
    listen(lfd, 1);
    getsockname(lfd, (void *)&sa, &len);
    int server_port = ntohs(sa.sin_port);
    pthread_t t;
    pthread_create(&t, 0, server, 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    connect(fd, (void *)&sa, sizeof sa);
    getsockname(fd, (void *)&sa, &len);
    char buf[16];
    int n = read(fd, buf, sizeof buf);
    pthread_join(t, 0);
    printf("tid=%d fd=%d client_port=%d server_port=%d n=%d\n", gettid(), fd, ntohs(sa.sin_port), server_port, n);
    return 0;
}
"#;

#[test]
fn socket_read_shows_the_wait_and_the_four_tuple() {
    let _g = one_at_a_time();
    let dir = tempdir("ksock");
    let bin = cc(&dir, "sock", SOCK_C);
    let check_socket = |out: &str, s: &Syscall| {
        assert_eq!(s.fd_kind, fd_kind::SOCKET);
        assert_eq!((s.family, s.protocol), (2, 6), "AF_INET, TCP");
        assert_eq!(u64::from(s.sport), field(out, "client_port"));
        assert_eq!(u64::from(s.dport), field(out, "server_port"));
        assert_eq!(&s.saddr[..4], &[127, 0, 0, 1]);
        assert_eq!(&s.daddr[..4], &[127, 0, 0, 1]);
    };
    // Default mode: the read's block, recorded at the switch-out.
    let trace = dir.join("t");
    let out = run_ok(&trace, &[], &[bin.to_str().unwrap()]);
    let tid = field(&out, "tid") as u32;
    let fd = field(&out, "fd") as i32;
    assert_eq!(field(&out, "n"), 5);
    let blocks: Vec<_> = at_switch_blocks(&records(&trace), tid)
        .into_iter()
        .filter(|(_, _, s)| (s.nr == NR_READ || s.nr == NR_RECVFROM) && s.fd == fd)
        .collect();
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    let (out_ts, d, s) = blocks[0];
    // Blocked until the server thread, back from its 40 ms sleep, wrote:
    // that thread is the waker. (Not an upper bound on the time: on a
    // loaded machine the server may wait long for a CPU after its sleep.)
    let recs = records(&trace);
    let (woken, waker) = first_wakeup_after(&recs, tid, out_ts).expect("the wakeup ending the read");
    assert!(woken - out_ts >= 38 * MS, "read blocked {} ns", woken - out_ts);
    assert!(d >= woken - out_ts);
    let server_slept = at_switch_blocks(&recs, waker)
        .into_iter()
        .any(|(t, _, s)| (s.nr == NR_NANOSLEEP || s.nr == NR_CLOCK_NANOSLEEP) && t < woken);
    assert!(server_slept, "the waker {waker} is not the server thread that slept");
    check_socket(&out, &s);

    // --syscalls io: also the full record, with its result.
    let trace = dir.join("t-io");
    let out = run_ok(&trace, &["--syscalls", "io"], &[bin.to_str().unwrap()]);
    let tid = field(&out, "tid") as u32;
    let fd = field(&out, "fd") as i32;
    let reads: Vec<_> = full_syscalls(&records(&trace), tid)
        .into_iter()
        .filter(|(_, s)| (s.nr == NR_READ || s.nr == NR_RECVFROM) && s.fd == fd)
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    let (entry, s) = reads[0];
    let d = s.exit_ts - entry;
    assert!(d >= 38 * MS, "read took {d} ns");
    assert_eq!(s.flags, SYSCALL_BLOCKED);
    assert_eq!(s.ret, 5);
    check_socket(&out, &s);
}

const FILE_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#define SIZE (4 << 20)
int main(int argc, char **argv) {
    char *buf = malloc(SIZE);
    memset(buf, 'x', SIZE);
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0644);
    write(fd, buf, SIZE);
    fsync(fd);
    struct stat st;
    fstat(fd, &st);
    /* Drop the pages so that touching the mapping is a major fault. */
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    volatile char *m = mmap(0, SIZE, PROT_READ, MAP_SHARED, fd, 0);
    char c = m[SIZE / 2];
    printf("tid=%d fd=%d major=%u minor=%u ino=%lu addr=%lu c=%c\n", gettid(), fd, major(st.st_dev),
           minor(st.st_dev), (unsigned long)st.st_ino, (unsigned long)(m + SIZE / 2), c);
    return 0;
}
"#;

#[test]
fn file_write_fsync_fault_and_block_io() {
    let _g = one_at_a_time();
    let dir = tempdir("kfile");
    let bin = cc(&dir, "file", FILE_C);
    let data = dir.join("data.bin");
    // Full records of syscalls that need not block: --syscalls io.
    let trace = dir.join("t-io");
    let out = run_ok(
        &trace,
        &["--syscalls", "io"],
        &[bin.to_str().unwrap(), data.to_str().unwrap()],
    );
    let tid = field(&out, "tid") as u32;
    let fd = field(&out, "fd") as i32;
    // The kernel's dev_t: major << 20 | minor.
    let dev = field(&out, "major") << 20 | field(&out, "minor");
    let ino = field(&out, "ino");
    let recs = records(&trace);
    let sc = full_syscalls(&recs, tid);
    for nr in [NR_OPENAT, NR_WRITE, NR_FSYNC] {
        // The last one: ld.so opened (and closed) the libraries on fd 3 too.
        let (_, s) = sc
            .iter()
            .rfind(|(_, s)| s.nr == nr && s.fd == fd)
            .unwrap_or_else(|| panic!("no syscall {nr} on fd {fd}: {sc:?}"));
        assert_eq!(s.fd_kind, fd_kind::FILE, "{s:?}");
        assert_eq!((s.dev, s.ino), (dev, ino), "{s:?}");
    }
    // The recorder named the file once, and the merge shows its path.
    let paths: Vec<_> = recs
        .iter()
        .filter_map(|r| match &r.payload {
            Payload::FilePath(p) if (p.dev, p.ino) == (dev, ino) => Some(p.path.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(paths, vec![data.to_str().unwrap().to_string()]);
    let t = jtrace_merge::Trace::open(&trace).unwrap();
    let fsync = t
        .syscalls
        .iter()
        .rfind(|sc| sc.tid == tid && sc.rec.nr == NR_FSYNC && sc.rec.flags & SYSCALL_AT_SWITCH == 0)
        .expect("fsync in the merged trace");
    assert_eq!(
        jtrace_merge::describe_syscall(&t, fsync),
        format!("fsync(fd {fd}: file {}) = 0", data.display())
    );

    // Block I/O and the blocking page fault in the default mode, where the
    // fault is told apart from a syscall by the task's saved registers.
    let trace = dir.join("t");
    let out = run_ok(&trace, &[], &[bin.to_str().unwrap(), data.to_str().unwrap()]);
    let tid = field(&out, "tid") as u32;
    let fd = field(&out, "fd") as i32;
    let recs = records(&trace);
    // Whatever blocked inside fsync was that file.
    for (_, _, s) in at_switch_blocks(&recs, tid).iter().filter(|(_, _, s)| s.nr == NR_FSYNC) {
        assert_eq!((s.fd, s.fd_kind), (fd, fd_kind::FILE), "{s:?}");
        assert_eq!(s.ino, field(&out, "ino"), "{s:?}");
    }
    // The 4 MiB written reach the disk inside fsync, issued by this thread.
    let blocks: Vec<_> = recs
        .iter()
        .filter(|r| r.tid == tid)
        .filter_map(|r| match &r.payload {
            Payload::BlockIo(b) => Some((r.ts, *b)),
            _ => None,
        })
        .collect();
    let written: u64 = blocks
        .iter()
        .filter(|(_, b)| b.write == 1)
        .map(|(_, b)| u64::from(b.bytes))
        .sum();
    assert!(written >= 4 << 20, "block writes of the thread: {blocks:?}");
    assert!(blocks.iter().all(|(ts, b)| b.complete_ts >= *ts && b.dev != 0));
    // Touching the dropped page blocks on a read: a PAGE_FAULT at that address.
    let addr = field(&out, "addr");
    let faults: Vec<_> = recs
        .iter()
        .filter(|r| r.tid == tid)
        .filter_map(|r| match &r.payload {
            Payload::PageFault(p) => Some(*p),
            _ => None,
        })
        .collect();
    assert!(
        faults.iter().any(|p| p.address == addr),
        "faults {faults:?}, wanted address {addr:#x}"
    );
}

const FUTEX_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int holder_tid, waiter_tid, locked;
static void *waiter(void *a) {
    waiter_tid = gettid();
    while (!locked) ;
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    return 0;
}
int main(void) {
    pthread_t t;
    holder_tid = gettid();
    pthread_mutex_lock(&m);
    locked = 1;
    pthread_create(&t, 0, waiter, 0);
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, 0);
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    printf("holder=%d waiter=%d\n", holder_tid, waiter_tid);
    return 0;
}
"#;

#[test]
fn futex_wait_is_woken_by_the_releasing_thread() {
    let _g = one_at_a_time();
    let dir = tempdir("kfutex");
    let bin = cc(&dir, "futex", FUTEX_C);
    // Default mode: the futex block recorded at the switch-out.
    let trace = dir.join("t");
    let out = run_ok(&trace, &[], &[bin.to_str().unwrap()]);
    let holder = field(&out, "holder") as u32;
    let waiter = field(&out, "waiter") as u32;
    let recs = records(&trace);
    let waits: Vec<_> = at_switch_blocks(&recs, waiter)
        .into_iter()
        .filter(|(_, d, s)| s.nr == NR_FUTEX && *d >= 10 * MS)
        .collect();
    assert_eq!(waits.len(), 1, "blocked futex waits of the waiter: {waits:?}");
    let (out_ts, d, s) = waits[0];
    assert!(s.arg & 0xffff_ffff_ffff != 0, "futex address in arg");
    let wake = recs
        .iter()
        .find(|r| r.tid == waiter && r.ts > out_ts && r.ts <= out_ts + d && matches!(r.payload, Payload::Wakeup(_)))
        .expect("a wakeup of the waiter inside its futex wait");
    match &wake.payload {
        Payload::Wakeup(w) => assert_eq!(w.waker_tid, holder),
        _ => unreachable!(),
    }
}

const PREAD_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[2]);
    struct stat st;
    char buf[4096] = {0};
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0644);
    write(fd, buf, sizeof buf);
    fstat(fd, &st);
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += pread(fd, buf, sizeof buf, 0);
    printf("tid=%d fd=%d ino=%lu sum=%ld\n", gettid(), fd, (unsigned long)st.st_ino, sum);
    return 0;
}
"#;

#[test]
fn default_mode_writes_nothing_for_syscalls_that_do_not_block() {
    let _g = one_at_a_time();
    let dir = tempdir("kpread");
    let bin = cc(&dir, "pread", PREAD_C);
    let data = dir.join("data.bin");
    let n = 20_000u64;
    let cmd = [bin.to_str().unwrap(), data.to_str().unwrap(), "20000"];
    // ld.so reads the libraries with pread64 too: only those of the file.
    let preads = |trace: &Path, out: &str| -> Vec<Syscall> {
        syscalls(&records(trace), field(out, "tid") as u32)
            .into_iter()
            .filter(|(_, s)| s.nr == NR_PREAD64 && s.ino == field(out, "ino"))
            .map(|(_, s)| s)
            .collect()
    };
    // Reads of a cached page never block: no record at all by default.
    let trace = dir.join("t");
    let out = run_ok(&trace, &[], &cmd);
    assert_eq!(field(&out, "sum"), n * 4096);
    let got = preads(&trace, &out);
    assert!(
        got.is_empty(),
        "{} pread records: {:?}",
        got.len(),
        &got[..got.len().min(3)]
    );
    // --syscalls io: every one of them, with its result.
    let trace = dir.join("t-io");
    let out = run_ok(&trace, &["--syscalls", "io"], &cmd);
    let fd = field(&out, "fd") as i32;
    let got = preads(&trace, &out);
    let full: Vec<_> = got.iter().filter(|s| s.flags & SYSCALL_AT_SWITCH == 0).collect();
    assert_eq!(full.len() as u64, n);
    assert!(full
        .iter()
        .all(|s| s.ret == 4096 && s.fd == fd && s.fd_kind == fd_kind::FILE && s.arg == 4096));
    // --syscalls none: nothing syscall-related at all.
    let trace = dir.join("t-none");
    let out = run_ok(&trace, &["--syscalls", "none"], &cmd);
    let tid = field(&out, "tid") as u32;
    assert!(syscalls(&records(&trace), tid).is_empty());
}

const STORM_C: &str = include_str!("../bpf/bench/storm.c");

#[test]
fn drops_are_counted_stored_and_reported() {
    let _g = one_at_a_time();
    let dir = tempdir("kdrops");
    let bin = cc(&dir, "storm", STORM_C);
    let trace = dir.join("t");
    // One page of ring buffer against a switch storm: it must overflow.
    let o = jtrace_run(
        &trace,
        &["--ringbuf-bytes", "4096"],
        &[bin.to_str().unwrap(), "2", "0.3"],
    );
    assert!(o.status.success(), "jtrace run failed");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(" LOST)"), "{err}");
    let meta = Meta::load(&trace).unwrap();
    assert!(meta.complete);
    let lost = meta.kernel_lost_total();
    assert!(lost > 0, "{:?}", meta.kernel_lost);
    assert!(
        meta.kernel_lost.get("switch_out").copied().unwrap_or(0) > 0,
        "{:?}",
        meta.kernel_lost
    );
    // Every record that reached the file is intact and readable.
    let recs = records(&trace);
    assert!(recs.len() > 1000, "{} records", recs.len());
    let info = Command::new(jtrace()).arg("info").arg(&trace).output().unwrap();
    assert!(info.status.success());
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("kernel lost switch_out: "), "{info}");
    let report = Command::new(jtrace()).arg("report").arg(&trace).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let report = String::from_utf8_lossy(&report.stdout);
    assert!(report.contains(&format!("lost events: kernel {lost},")), "{report}");
}

const GETPID_C: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    long sum = 0;
    for (int i = 0; i < n; i++) {
        sum += getpid();
        if (i % 2)
            sum += getppid();
    }
    printf("tid=%d ppid=%d sum=%ld\n", gettid(), getppid(), sum);
    return 0;
}
"#;

#[test]
fn uprobe_on_libc_counts_every_call() {
    let _g = one_at_a_time();
    let dir = tempdir("kuprobe");
    let bin = cc(&dir, "getpid", GETPID_C);
    let trace = dir.join("t");
    // One uprobe.multi link per library by default; the pre-6.6 path of one
    // perf uprobe per function must count the same.
    for env in [&[][..], &[("JTRACE_NO_UPROBE_MULTI", "1")][..]] {
        let o = jtrace_run_env(
            &trace,
            &["--lib-calls", "libc.so.6:getpid,libc.so.6:getppid"],
            &[bin.to_str().unwrap(), "1234"],
            env,
        );
        assert!(o.status.success(), "jtrace run failed ({env:?})");
        let out = String::from_utf8(o.stdout).unwrap();
        let (tid, ppid) = (field(&out, "tid") as u32, field(&out, "ppid"));
        let recs = records(&trace);
        // The libc ones (safepoint probes on every installed libjvm follow).
        let defs: Vec<_> = recs
            .iter()
            .filter_map(|r| match &r.payload {
                Payload::ProbeDef(p) if p.library == "libc.so.6" => Some((p.symbol.clone(), p.probe)),
                _ => None,
            })
            .collect();
        assert_eq!(defs.len(), 2, "{defs:?}");
        let probe = |sym: &str| defs.iter().find(|(s, _)| s == sym).expect("PROBE_DEF").1;
        // Calls after the program's exec (not jtrace's own, before it).
        let exec_ts = recs
            .iter()
            .find(|r| r.tid == tid && matches!(r.payload, Payload::Exec(_)))
            .expect("EXEC")
            .ts;
        let calls: Vec<_> = recs
            .iter()
            .filter(|r| r.tid == tid && r.ts > exec_ts)
            .filter_map(|r| match &r.payload {
                Payload::LibCall(c) => Some((r.ts, *c)),
                _ => None,
            })
            .collect();
        let of = |p: u32| calls.iter().filter(|(_, c)| c.probe == p).collect::<Vec<_>>();
        let (getpid, getppid) = (of(probe("getpid")), of(probe("getppid")));
        // getppid once more for the printf line.
        assert_eq!((getpid.len(), getppid.len(), calls.len()), (1234, 618, 1852), "{env:?}");
        assert!(getpid.iter().all(|(ts, c)| c.exit_ts >= *ts && c.ret == u64::from(tid)));
        assert!(getppid.iter().all(|(ts, c)| c.exit_ts >= *ts && c.ret == ppid));
        std::fs::remove_dir_all(&trace).unwrap();
    }
}

#[test]
fn bad_lib_calls_fail_before_running() {
    let dir = tempdir("kbadlib");
    let marker = dir.join("ran");
    for (spec, msg) in [
        ("libc.so.6:getpidx", "has no symbol getpidx"),
        ("libnosuch.so.7:f", "libnosuch.so.7: not found in the linker cache"),
        ("libc.so.6", "is not LIBRARY:SYMBOL"),
    ] {
        let trace = dir.join("t");
        let o = jtrace_run(&trace, &["--lib-calls", spec], &["touch", marker.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(msg), "{spec}: {err}");
        assert!(!marker.exists(), "the command ran");
        assert!(!trace.exists(), "a trace was left behind");
    }
}

const LOOP_C: &str = r#"
#include <stdio.h>
#include <time.h>
int main(void) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < 50; i++)
        nanosleep(&ts, 0);
    return 0;
}
"#;

#[test]
fn record_attaches_to_a_running_process() {
    let _g = one_at_a_time();
    let dir = tempdir("krecord");
    let bin = cc(&dir, "loop", LOOP_C);
    // Stops by itself when the process exits (~1 s), well before --duration.
    let mut child = Command::new(&bin).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    // Running the program (its cmdline is in /proc) before recording starts.
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut ready).unwrap();
    assert_eq!(ready, "ready\n");
    let trace = dir.join("t");
    let t0 = std::time::Instant::now();
    let o = Command::new(jtrace())
        .args(["record", "-p", &pid.to_string(), "--duration", "20s", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success());
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "did not stop when the process exited"
    );
    child.wait().unwrap();
    let meta = Meta::load(&trace).unwrap();
    assert!(meta.complete);
    assert_eq!(meta.pid, pid);
    assert_eq!(
        meta.command,
        vec![bin.to_str().unwrap().to_string()],
        "{:?}",
        meta.command
    );
    let sleeps = syscalls(&records(&trace), pid)
        .into_iter()
        .filter(|(_, s)| s.nr == NR_NANOSLEEP || s.nr == NR_CLOCK_NANOSLEEP)
        .count();
    // All but those before the programs were attached (start-up takes a
    // few hundred ms on a loaded machine: symbol lookups, BPF verification).
    assert!((10..=50).contains(&sleeps), "{sleeps} sleeps recorded");

    // --duration stops a process that keeps running.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let t0 = std::time::Instant::now();
    let o = Command::new(jtrace())
        .args(["record", "-p", &child.id().to_string(), "--duration", "300ms", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(Meta::load(&trace).unwrap().complete);
}
