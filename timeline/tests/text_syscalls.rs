//! The streamed text trace names the syscall a block was in exactly as the
//! in-memory one does, also when another syscall's record carries an entry
//! time inside the block (it is walked before the switch-in that ends the
//! block). Found on a recorded JDK trace, where the streamed view said "in a
//! syscall" for a futex wait of a GC thread.

mod fixture;

use fixture::*;
use jtrace_format as fmt;
use jtrace_merge::stream::StreamOptions;
use jtrace_merge::Trace;
use jtrace_timeline::{write_text, write_text_streaming, TextOptions};

#[test]
fn block_keeps_its_syscall_when_a_later_record_enters_inside_it() {
    let dir = tempdir("text-syscalls").join("t.jtrace");
    let mut b = Builder::default();
    let tid = 200;
    b.comm(tid, 1000, "reader");
    b.switch_in(tid, 1000, 0);
    // Blocked in read(fd 3) from 1500 to 2000 (at-switch record).
    b.syscall(
        tid,
        1500,
        fmt::Syscall {
            nr: 0,
            fd: 3,
            flags: fmt::SYSCALL_AT_SWITCH | fmt::SYSCALL_BLOCKED,
            ..Default::default()
        },
    );
    b.switch_out(tid, 1500, false, 0);
    // A write(fd 4) whose full record (written at its exit) says it was
    // entered at 1800, inside the block.
    b.syscall(
        tid,
        1800,
        fmt::Syscall {
            exit_ts: 2600,
            nr: 1,
            fd: 4,
            ret: 8,
            ..Default::default()
        },
    );
    b.switch_in(tid, 2000, 0);
    b.switch_out(tid, 3000, true, 0);
    b.switch_in(tid, 3500, 0);
    b.write(&dir, 1000, 4000);

    let opts = TextOptions {
        all_events: true,
        ..Default::default()
    };
    let mut whole = Vec::new();
    write_text(&Trace::open(&dir).unwrap(), &mut whole, &opts).unwrap();
    let whole = String::from_utf8(whole).unwrap();
    let block = whole
        .lines()
        .find(|l| l.contains("switch-out blocked"))
        .unwrap_or_else(|| panic!("no block in:\n{whole}"));
    assert!(block.contains(" in read("), "{block}");
    let mut streamed = Vec::new();
    write_text_streaming(&dir, &mut streamed, &opts, &StreamOptions::default()).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), whole);
}
