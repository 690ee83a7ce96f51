//! `jtrace info`: a trace's metadata, event counts and losses. It scans the
//! trace record by record ([`Trace::scan`]): memory does not grow with the
//! trace's length.

use anyhow::Context;
use jtrace_merge::Trace;
use jtrace_timeline::text::ms;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `jtrace info`.
#[derive(clap::Args)]
pub(crate) struct InfoArgs {
    /// Trace directory.
    trace: PathBuf,
    /// Also look up the source lines of native frames (DWARF), and list the
    /// binaries without them and the frames no line covers.
    #[arg(long)]
    lines: bool,
}

/// `jtrace info TRACE`.
pub(crate) fn info(args: InfoArgs) -> anyhow::Result<()> {
    let t = Trace::scan(&args.trace).with_context(|| format!("cannot open trace {}", args.trace.display()))?;
    Ok(print_info(&t, args.lines)?)
}

/// Written in one go, so that a closed pipe (`| head`) is an error to
/// ignore, not a panic of println!.
fn print_info(t: &Trace, lines: bool) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let m = &t.meta;
    writeln!(out, "trace      {}", t.dir.display())?;
    writeln!(
        out,
        "format     v{}  (written by jtrace {})",
        m.version, m.jtrace_version
    )?;
    writeln!(
        out,
        "complete   {}",
        if m.complete {
            "yes"
        } else {
            "NO: recording was cut off; this is a readable prefix"
        }
    )?;
    writeln!(out, "command    {}", m.command.join(" "))?;
    writeln!(out, "pid        {}", t.pid())?;
    if let Some(c) = m.exit_code {
        writeln!(out, "exit code  {c}")?;
    }
    writeln!(out, "kernel     {}", m.kernel)?;
    writeln!(out, "started    {}", jtrace_timeline::fmt_realtime(m.start_realtime_ns))?;
    writeln!(out, "duration   {} ms", ms(t.duration_ns()))?;
    if !m.methods.is_empty() {
        writeln!(out, "methods    {}", m.methods.join(" "))?;
    }
    let virtual_threads = t.threads.values().filter(|x| x.virtual_id.is_some()).count();
    let platform = (t.threads.values())
        .filter(|x| x.java_name.is_some() && x.virtual_id.is_none())
        .count();
    writeln!(
        out,
        "threads    {} ({} Java platform threads, {} virtual threads, {} others)",
        t.threads.len(),
        platform,
        virtual_threads,
        t.threads.len() - platform - virtual_threads
    )?;
    writeln!(out, "JVMs       {:?}", t.jvm_pids)?;
    // Traced ones, and those named for JIT code and stacks.
    writeln!(out, "methods    {} defined", t.methods.len())?;
    writeln!(out, "events     kernel {}  jvm {}", t.kernel_records, t.jvm_records)?;
    writeln!(out, "lost       kernel {}  jvm {}", t.losses.kernel, t.losses.jvm)?;
    if let Some(w) = jtrace_merge::window(t) {
        let ms = |ns: u64| jtrace_timeline::text::ms(ns);
        writeln!(
            out,
            "window     +{} .. +{} ms covered; {} chunk(s), {} bytes fell out of the ring",
            ms(w.from_ns),
            ms(w.to_ns),
            w.dropped_chunks,
            w.dropped_bytes
        )?;
        if let Some(b) = w.max_size_bytes {
            writeln!(out, "  ring     --max-size {b} bytes")?;
        }
        if let Some(a) = w.max_age_ns {
            writeln!(out, "  ring     --max-age {} ms", ms(a))?;
        }
    }
    for c in jtrace_merge::report::describe_cgroups(&jtrace_merge::report::processes(t)) {
        writeln!(out, "cgroup     {c}")?;
    }
    for (cause, timing) in [("throttled", &m.throttled_timing), ("steal", &m.steal_timing)] {
        if let Some(t) = timing {
            writeln!(out, "{cause:<10} {}", t.how)?;
        }
    }
    if m.kernel_throttles_untimed > 0 {
        writeln!(
            out,
            "untimed    {} throttles not timed (the thread left its throttled cfs_rq first, or it timed \
             none): their time is runqueue",
            m.kernel_throttles_untimed
        )?;
    }
    if m.kernel_inferred_switch_ins > 0 {
        writeln!(
            out,
            "inferred   {} switch-ins the kernel did not report",
            m.kernel_inferred_switch_ins
        )?;
    }
    for (k, v) in &m.kernel_lost {
        if *v > 0 {
            writeln!(out, "  kernel lost {k}: {v}")?;
        }
    }
    for (k, v) in &m.kernel_unwritten {
        if *v > 0 {
            writeln!(out, "  kernel not written {k}: {v}")?;
        }
    }
    let start = m.start_monotonic_ns;
    for &(tid, first, events) in &t.losses.jvm_lost_threads {
        let name = t.threads.get(&tid).map_or("?", |th| th.display_name());
        writeln!(
            out,
            "  jvm lost tid {tid} ({name}): {events} events from +{} ms",
            ms(first.saturating_sub(start))
        )?;
    }
    if !t.stacks.is_empty() {
        print_stacks(&mut out, t, lines)?;
    }
    for p in &t.losses.truncated {
        writeln!(out, "problem    {p}")?;
    }
    for p in jtrace_merge::report::left_out_problems(t) {
        writeln!(out, "left out   {p}")?;
    }
    for p in &t.losses.agent_errors {
        writeln!(out, "agent      {p}")?;
    }
    out.flush()
}

/// The stacks' counts, and what could not be named (every stack is named
/// once to count it; with `lines`, with their source lines).
fn print_stacks(out: &mut impl Write, t: &Trace, lines: bool) -> std::io::Result<()> {
    let s = &t.stacks;
    let samples: u64 = s.cpu_samples.values().sum();
    writeln!(
        out,
        "stacks     {} kernel, {} user ({} distinct switch-out/sample pairs); {} CPU samples at {} Hz",
        s.kernel.len(),
        s.user.len(),
        s.pairs.len(),
        samples,
        t.meta.cpu_sample_hz
    )?;
    let b = &s.block_stacks;
    if let Some(min) = t.meta.stack_min_block_ns {
        writeln!(
            out,
            "  blocks   {} stacks taken as their thread resumed (blocks ≥ {} µs, and {} shorter ones sampled at ≤ {}/s per CPU); {} without a user stack",
            b.records,
            min / 1000,
            b.sampled,
            t.meta.short_block_stacks_hz,
            b.no_user
        )?;
    }
    if t.meta.kernel_addresses_hidden {
        writeln!(
            out,
            "  kernel   no kernel addresses: functions named while recording, frames as offsets into them \
             (the kernel hides its addresses from the invoking user)"
        )?;
    }
    let sym = jtrace_merge::Symbolizer::new(t);
    let sym = if lines { sym.with_lines() } else { sym };
    sym.name_all();
    let p = sym.problems();
    writeln!(
        out,
        "  frames   {} unresolved ({} in unloaded JIT code); {} stacks truncated; {} stacks lost",
        p.unresolved_frames, p.unloaded_jit_frames, p.truncated_stacks, p.missing_stacks
    )?;
    for b in &p.missing_binaries {
        writeln!(
            out,
            "  binary   {b}: not found with the recorded build id (its frames are unresolved)"
        )?;
    }
    for (b, why) in &p.refused_binaries {
        writeln!(out, "  binary   {b}: not read: {why} (its frames are unresolved)")?;
    }
    for b in &p.stripped_binaries {
        writeln!(
            out,
            "  binary   {b}: stripped (no function symbols; its frames are unresolved)"
        )?;
    }
    if lines {
        let l = &p.lines;
        writeln!(
            out,
            "  lines    {} binaries without source lines; {} native frames without a line",
            l.binaries_without_lines.len(),
            l.frames_without_line
        )?;
        for (b, why) in &l.binaries_without_lines {
            writeln!(out, "  binary   {b}: no source lines: {why}")?;
        }
    }
    Ok(())
}
