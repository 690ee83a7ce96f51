//! The folding the flame graph draws (`fold_streaming`): a window clips
//! off-CPU time exactly (two halves add up to the whole, per cause), a
//! thread selection keeps exactly that thread's stacks, and the wakers of
//! a stack never hold more than its blocked time. On a synthetic trace
//! with wakers inside traced methods.

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::Trace;
use jtrace_testkit::synth;
use jtrace_timeline::{fold_streaming, time_origin, CollapsedOptions, Folded};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jtrace-flame-fold-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fold(dir: &Path, opts: CollapsedOptions) -> Folded {
    let base = CollapsedOptions {
        all: true,
        cpu: true,
        ..opts
    };
    fold_streaming(dir, &base, true, &StreamOptions::default()).unwrap().1
}

fn per_cause(f: &Folded) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (k, v) in &f.stacks {
        *m.entry(k.split(';').next().unwrap().to_string()).or_default() += v;
    }
    m
}

#[test]
fn windows_threads_and_wakers_fold_exactly() {
    let dir = tempdir("synth").join("t.jtrace");
    synth::generate(&dir, 100_000, 6).unwrap();
    let trace = Trace::open(&dir).unwrap();
    let t0 = time_origin(&trace);
    let end = trace.threads.values().map(|t| t.last_ts).max().unwrap() - t0 + 1;
    let whole = fold(&dir, CollapsedOptions::default());
    assert!(!whole.stacks.is_empty());

    // The whole span as a window is the whole trace.
    let all = fold(
        &dir,
        CollapsedOptions {
            window: Some((0, end)),
            ..Default::default()
        },
    );
    assert_eq!(per_cause(&all), per_cause(&whole));

    // Two halves add up to it, cause by cause, to the ns.
    let mid = end / 2;
    let a = per_cause(&fold(
        &dir,
        CollapsedOptions {
            window: Some((0, mid)),
            ..Default::default()
        },
    ));
    let b = per_cause(&fold(
        &dir,
        CollapsedOptions {
            window: Some((mid, end)),
            ..Default::default()
        },
    ));
    let mut sum = a.clone();
    for (k, v) in &b {
        *sum.entry(k.clone()).or_default() += v;
    }
    assert_eq!(sum, per_cause(&whole));
    assert!(
        a.values().sum::<u64>() > 0 && b.values().sum::<u64>() > 0,
        "{a:?} {b:?}"
    );

    // One thread: exactly its lines of the per-thread folding.
    let per_thread = fold(
        &dir,
        CollapsedOptions {
            thread: true,
            ..Default::default()
        },
    );
    let t = trace.threads.values().find(|t| t.tid != 0).unwrap();
    let label = format!(";{} [{}]", t.display_name(), t.tid);
    let mut want = BTreeMap::new();
    for (k, v) in per_thread.stacks.iter().filter(|(k, _)| k.contains(&label)) {
        *want.entry(k.split(';').next().unwrap().to_string()).or_default() += v;
    }
    let one = fold(
        &dir,
        CollapsedOptions {
            threads: Some(t.tid.to_string()),
            ..Default::default()
        },
    );
    assert_eq!(per_cause(&one), want);

    // Wakers: named, and within each stack's time.
    assert!(!whole.wakers.is_empty(), "the synthetic trace has wakeups");
    for (k, w) in &whole.wakers {
        let named: u64 = w.values().sum();
        assert!(named <= whole.stacks[k], "{k}: {named} of {}", whole.stacks[k]);
        assert!(w.keys().all(|&id| (id as usize) < whole.waker_names.len()));
    }
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}
