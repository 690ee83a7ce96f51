//! Times the phases of the streaming report on a trace directory: reading +
//! buffering/sorting, the walk, and the in-memory path for comparison.
//!
//! cargo run --release -p jtrace-merge --example phases -- TRACE [BUDGET] [--stream-only]

use jtrace_merge::stream::{self, StreamOptions};
use jtrace_merge::{analyze, Invocation, ThreadInfo, Trace, Visitor};
use std::time::Instant;

struct Count(u64);
impl Visitor for Count {
    fn exit(&mut self, _: &ThreadInfo, _: usize, _: &Invocation) {
        self.0 += 1;
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(
        args.get(1)
            .ok_or_else(|| anyhow::anyhow!("usage: phases TRACE [BUDGET]"))?,
    );
    let budget = args
        .get(2)
        .map(|s| stream::parse_size(s))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let opts = StreamOptions {
        memory_budget: budget.unwrap_or(stream::DEFAULT_BUDGET),
        ..Default::default()
    };
    let t0 = Instant::now();
    let (trace, events) = stream::open(&dir, &opts)?;
    let runs = events.spilled_runs();
    let t1 = Instant::now();
    let mut c = Count(0);
    stream::analyze(&trace, events, &mut c)?;
    let t2 = Instant::now();
    println!(
        "stream: read+sort {:.3}s ({runs} runs), walk {:.3}s, {} invocations",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        c.0
    );
    if args.iter().any(|a| a == "--stream-only") {
        return Ok(());
    }
    let t0 = Instant::now();
    let trace = Trace::open(&dir)?;
    let t1 = Instant::now();
    let mut c = Count(0);
    analyze(&trace, &mut c);
    let t2 = Instant::now();
    println!(
        "in memory: read+sort {:.3}s, walk {:.3}s, {} invocations",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        c.0
    );
    Ok(())
}
