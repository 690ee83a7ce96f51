//! Writes a synthetic trace of N events for merge/report benchmarks:
//! T threads each entering and leaving methods, switching out (half
//! preempted, half blocked in a futex and woken), in realistic proportions.
//! The streams are produced with the real encoder, so the reader does exactly
//! what it does on a recorded trace.
//!
//! cargo run --release -p jtrace-merge --example synth -- OUT_DIR EVENTS [THREADS]

use jtrace_format::*;
use jtrace_merge::Meta;
use std::io::Write;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        anyhow::bail!("usage: synth OUT_DIR EVENTS [THREADS]");
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let total: u64 = args[2].parse()?;
    let threads: u32 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(16);
    std::fs::create_dir_all(&dir)?;
    let pid = 4242;
    let mut kernel = std::io::BufWriter::new(std::fs::File::create(dir.join(KERNEL_FILE))?);
    let mut jvm = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{JVM_FILE_PREFIX}{pid}.bin")))?);
    kernel.write_all(&FileHeader::new(KERNEL_MAGIC).to_bytes())?;
    jvm.write_all(&FileHeader::new(JVM_MAGIC).to_bytes())?;
    let mut k = Encoder::new();
    let mut j = Encoder::new();
    j.record(&Record {
        tid: pid,
        ts: 0,
        payload: Payload::JvmStart(JvmStart {
            pid,
            vm_version: "synthetic".into(),
        }),
    });
    for m in 0..64u64 {
        j.record(&Record {
            tid: pid,
            ts: 0,
            payload: Payload::MethodDef(MethodDef {
                method: m,
                class: format!("com.example.C{}", m % 8),
                name: format!("m{m}"),
                signature: "()V".into(),
            }),
        });
    }
    for t in 0..threads {
        j.record(&Record {
            tid: pid + 1 + t,
            ts: 1,
            payload: Payload::ThreadStart(ThreadStart {
                daemon: 0,
                name: format!("worker-{t}"),
                group: "main".into(),
                parent: "main".into(),
            }),
        });
    }
    // Per step and thread: enter, switch-out, (wakeup), switch-in, exit.
    let mut written = 0u64;
    let mut ts = 1_000u64;
    let mut step = 0u64;
    while written < total {
        for t in 0..threads {
            let tid = pid + 1 + t;
            let m = (step * 7 + t as u64) % 64;
            let ev = MethodEvent {
                method: m,
                flags: 0,
                reserved: 0,
            };
            j.record(&Record {
                tid,
                ts,
                payload: Payload::MethodEntry(ev),
            });
            let preempt = (step + t as u64).is_multiple_of(2);
            let out = SwitchOut {
                tgid: pid,
                prev_state: if preempt { 0 } else { 1 },
                cpu: t % 2,
                next_tid: 0,
            };
            k.record(&Record {
                tid,
                ts: ts + 100,
                payload: Payload::SwitchOut(out),
            });
            written += 2;
            if !preempt {
                let w = Wakeup {
                    tgid: pid,
                    waker_tid: pid + 1 + (t + 1) % threads,
                    waker_tgid: pid,
                    target_cpu: 0,
                    new_task: 0,
                    reserved: 0,
                };
                k.record(&Record {
                    tid,
                    ts: ts + 600,
                    payload: Payload::Wakeup(w),
                });
                written += 1;
            }
            let inn = SwitchIn {
                tgid: pid,
                cpu: t % 2,
                prev_tid: 0,
                reserved: 0,
            };
            k.record(&Record {
                tid,
                ts: ts + 700,
                payload: Payload::SwitchIn(inn),
            });
            j.record(&Record {
                tid,
                ts: ts + 900,
                payload: Payload::MethodExit(ev),
            });
            written += 2;
            ts += 10;
        }
        ts += 1_000;
        step += 1;
        if k.buf.len() > 1 << 20 {
            kernel.write_all(&k.buf)?;
            k.buf.clear();
        }
        if j.buf.len() > 1 << 20 {
            jvm.write_all(&j.buf)?;
            j.buf.clear();
        }
    }
    kernel.write_all(&k.buf)?;
    jvm.write_all(&j.buf)?;
    kernel.flush()?;
    jvm.flush()?;
    let meta = Meta {
        format: "jtrace".into(),
        version: FORMAT_VERSION,
        complete: true,
        jtrace_version: "synthetic".into(),
        start_monotonic_ns: 0,
        end_monotonic_ns: ts,
        pid,
        command: vec!["synthetic".into()],
        kernel_records: written,
        ..Default::default()
    };
    meta.store(&dir)?;
    println!("wrote {written} events for {threads} threads to {}", dir.display());
    Ok(())
}
