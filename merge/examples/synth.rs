//! Writes a synthetic trace (jtrace_testkit::synth) for the merge, report
//! and view benchmarks.
//!
//! cargo run --release -p jtrace-merge --example synth -- OUT_DIR EVENTS [THREADS] [simple] [batched]

use jtrace_testkit::synth::{generate_shaped, Shape};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        anyhow::bail!("usage: synth OUT_DIR EVENTS [THREADS] [simple] [batched]");
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let total: u64 = args[2].parse()?;
    let threads: u32 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(16);
    let mut shape = Shape::default();
    for a in args.iter().skip(4) {
        match a.as_str() {
            "simple" => shape.simple = true,
            "batched" => shape.method_batches = true,
            other => anyhow::bail!("unknown option {other:?}: expected simple or batched"),
        }
    }
    let written = generate_shaped(&dir, total, threads, shape)?;
    println!("wrote {written} events for {threads} threads to {}", dir.display());
    Ok(())
}
