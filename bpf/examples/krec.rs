//! The kernel recorder alone, for benchmarking the BPF programs without the
//! rest of jtrace (no JVM agent, no merge):
//!
//! `krec [--syscalls MODE] [--ringbuf-kb N] OUT_FILE -- COMMAND [ARGS...]`
//!
//! records the command's process tree (default event set) into OUT_FILE and
//! prints the counters to stderr; exits with the command's status.

use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use jtrace_bpf::{KernelRecorder, RecorderConfig};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("krec: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(sep) = args.iter().position(|a| a == "--") else {
        bail!("usage: krec [--syscalls none|blocked|io|all] OUT_FILE -- COMMAND [ARGS...]");
    };
    const USAGE: &str = "usage: krec [--syscalls none|blocked|io|all] [--ringbuf-kb N] OUT_FILE -- COMMAND [ARGS...]";
    let (opts, cmd) = (&args[..sep], &args[sep + 1..]);
    let Some((out, mut flags)) = opts.split_last() else {
        bail!(USAGE);
    };
    if cmd.is_empty() {
        bail!("no command after --");
    }
    let mut cfg = RecorderConfig::create(out)?;
    cfg.launcher_tgid = Some(std::process::id());
    while let [flag, value, rest @ ..] = flags {
        match flag.as_str() {
            "--syscalls" => cfg.syscalls = value.parse()?,
            "--ringbuf-kb" => {
                let kb: usize = value.parse().with_context(|| format!("--ringbuf-kb {value:?}"))?;
                cfg.ringbuf_bytes = kb << 10;
            }
            _ => bail!(USAGE),
        }
        flags = rest;
    }
    if !flags.is_empty() {
        bail!(USAGE);
    }
    let rec = KernelRecorder::start(cfg)?;
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .status()
        .with_context(|| format!("running {}", cmd[0]))?;
    let stats = rec.stop()?;
    eprintln!(
        "krec: {} records, {} lost, emitted {:?}, lost {:?}",
        stats.records, stats.lost_total, stats.emitted, stats.lost
    );
    Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8))
}
