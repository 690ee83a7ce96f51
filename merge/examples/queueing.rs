//! A custom analysis on the event trace API: queueing time between two
//! methods, as JPMT replayed request queues. Every exit of PRODUCER (e.g. the
//! method that enqueues a request) is matched, in order, with the next entry
//! of CONSUMER on any thread (the method that starts serving it); the gap is
//! the time the request waited in the queue.
//!
//! cargo run -p jtrace-merge --example queueing -- TRACE Producer.put Consumer.handle

use jtrace_merge::{analyze, glob_match, Invocation, ThreadInfo, Trace, Visitor};
use std::collections::VecDeque;

#[derive(Default)]
struct Ends {
    produced: Vec<u64>,
    consumed: Vec<u64>,
}

struct Collect<'a> {
    trace: &'a Trace,
    producer: String,
    consumer: String,
    ends: Ends,
}

impl Visitor for Collect<'_> {
    fn exit(&mut self, _t: &ThreadInfo, _depth: usize, inv: &Invocation) {
        let name = self.trace.methods[inv.method as usize].qualified();
        if glob_match(&self.producer, &name) {
            self.ends.produced.push(inv.exit);
        }
        if glob_match(&self.consumer, &name) {
            self.ends.consumed.push(inv.entry);
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        anyhow::bail!("usage: queueing TRACE PRODUCER_METHOD CONSUMER_METHOD (globs over class.method)");
    }
    let trace = Trace::open(args[1].as_ref())?;
    let mut c = Collect {
        trace: &trace,
        producer: args[2].clone(),
        consumer: args[3].clone(),
        ends: Ends::default(),
    };
    analyze(&trace, &mut c);
    let mut produced: Vec<u64> = c.ends.produced;
    let mut consumed: Vec<u64> = c.ends.consumed;
    produced.sort_unstable();
    consumed.sort_unstable();
    // FIFO: each consumption serves the oldest request produced before it.
    let mut queue: VecDeque<u64> = VecDeque::new();
    let mut waits = Vec::new();
    let mut p = produced.into_iter().peekable();
    for start in consumed {
        while let Some(&t) = p.peek() {
            if t > start {
                break;
            }
            queue.push_back(t);
            p.next();
        }
        if let Some(t) = queue.pop_front() {
            waits.push(start - t);
        }
    }
    if waits.is_empty() {
        println!("no matched pairs");
        return Ok(());
    }
    waits.sort_unstable();
    let pct = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize] as f64 / 1e6;
    println!(
        "{} requests queued: min {:.3} ms, median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        waits.len(),
        pct(0.0),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    Ok(())
}
