//! Tests of [`crate::demotion::watch`].

use super::*;

fn ev(delta: u64, id: u64, kind: u64) -> jlong {
    (delta | id << jtrace_format::BATCH_ID_SHIFT | kind << BATCH_KIND_SHIFT) as jlong
}

fn tallies(w: &mut ThreadWatch) -> Vec<(u32, Tally)> {
    let mut t = w.take();
    t.sort_by_key(|(id, _)| *id);
    t
}

#[test]
fn calls_are_tallied_with_their_wall() {
    let mut w = ThreadWatch::default();
    // 1 { 2 {} 2 {} } then 1 stays open.
    let data = [
        ev(5, 1, 0),
        ev(10, 2, 0),
        ev(3, 2, 1),
        ev(10, 2, 0),
        ev(4, 2, 2),
        ev(1, 1, 1),
        ev(7, 1, 0),
    ];
    assert!(!w.observe(
        Block {
            base: 100,
            events: &data
        },
        0
    ));
    assert_eq!(w.window(), (7, 40));
    let t = tallies(&mut w);
    assert_eq!(
        t[0],
        (
            1,
            Tally {
                calls: 1,
                ns: 28,
                short: 1,
                ..Tally::default()
            }
        )
    );
    assert_eq!(
        t[1],
        (
            2,
            Tally {
                calls: 2,
                ns: 7,
                short: 2,
                ..Tally::default()
            }
        )
    );
    assert_eq!(w.frames.len(), 1);
}

#[test]
fn a_jvm_block_marks_the_open_calls() {
    let mut w = ThreadWatch::default();
    w.observe(
        Block {
            base: 0,
            events: &[ev(1, 1, 0), ev(1, 2, 0)],
        },
        0,
    );
    w.block_begins();
    w.observe(
        Block {
            base: 2,
            events: &[ev(1, 3, 0), ev(1, 3, 1), ev(1, 2, 1), ev(1, 1, 1)],
        },
        0,
    );
    let t = tallies(&mut w);
    assert!(t.iter().all(|(id, t)| t.jvm_block == (*id != 3)), "{t:?}");
}

#[test]
fn a_class_loading_wait_marks_no_call() {
    let mut w = ThreadWatch::default();
    assert!(!w.in_call());
    w.observe(
        Block {
            base: 0,
            events: &[ev(1, 1, 0)],
        },
        0,
    );
    assert!(w.in_call());
    w.class_loading_begins();
    assert_eq!(w.jvm_blocks, 1, "its switch is not to be guessed at");
    w.observe(
        Block {
            base: 1,
            events: &[ev(1, 1, 1)],
        },
        0,
    );
    let t = tallies(&mut w);
    assert!(!t[0].1.jvm_block, "{t:?}");
}

#[test]
fn blocked_and_dropped_calls_are_news_until_taken() {
    let mut w = ThreadWatch::default();
    w.observe(
        Block {
            base: 0,
            events: &[ev(1, 1, 0), ev(1, 1, 1)],
        },
        0,
    );
    assert!(!w.has_news());
    w.observe(
        Block {
            base: 2,
            events: &[ev(1, 2, 0)],
        },
        0,
    );
    w.block_begins();
    w.observe(
        Block {
            base: 3,
            events: &[ev(1, 2, 1)],
        },
        0,
    );
    assert!(w.has_news());
    w.take();
    assert!(!w.has_news());
    // A call left out by --min-duration.
    assert!(w.observe(
        Block {
            base: 4,
            events: &[ev(1, 3, 0), ev(1, 3, 1)],
        },
        10,
    ));
    assert!(w.has_news());
    let t = tallies(&mut w);
    assert_eq!((t[0].0, t[0].1.dropped, t[0].1.calls), (3, 1, 1));
}

#[test]
fn short_leaf_calls_are_left_out_and_their_time_carried() {
    let mut w = ThreadWatch::default();
    // 1 { 2 (5 ns) 2 (50 ns) 3 (4 ns, thrown) } with min 10 ns.
    let data = [
        ev(1, 1, 0),
        ev(2, 2, 0),
        ev(5, 2, 1),
        ev(3, 2, 0),
        ev(50, 2, 1),
        ev(1, 3, 0),
        ev(4, 3, 2),
        ev(6, 1, 1),
    ];
    assert!(w.observe(Block { base: 0, events: &data }, 10));
    let kept = w.filtered().to_vec();
    assert_eq!(
        kept,
        vec![
            ev(1, 1, 0),
            ev(10, 2, 0),
            ev(50, 2, 1),
            ev(1, 3, 0),
            ev(4, 3, 2),
            ev(6, 1, 1)
        ]
    );
    // Time is kept: the sums of the deltas agree.
    let sum = |v: &[jlong]| v.iter().map(|&e| e as u64 & BATCH_DELTA_MASK).sum::<u64>();
    assert_eq!(sum(&kept), sum(&data));
    let t = tallies(&mut w);
    assert_eq!(t[1].1.dropped, 1);
    assert_eq!(t[1].1.dropped_ns, 5);
    assert_eq!(t[1].1.calls, 2);
    assert_eq!(t[2].1.dropped, 0);
}

#[test]
fn the_longest_gaps_are_found() {
    let data = [ev(5, 1, 0), ev(90, 1, 1), ev(7, 1, 0), ev(300, 1, 1), ev(2, 1, 0)];
    assert_eq!(longest_gaps(&data, 2, 0), vec![3, 1]);
    assert_eq!(longest_gaps(&data, 0, 0), Vec::<usize>::new());
    assert_eq!(longest_gaps(&data, 9, 0).len(), 5);
    // The first gap was mostly the drain's own time.
    let data = [ev(500, 1, 0), ev(90, 1, 1)];
    assert_eq!(longest_gaps(&data, 1, 0), vec![0]);
    assert_eq!(longest_gaps(&data, 1, 450), vec![1]);
}

/// Pseudo-random blocks of a thread's events: nested calls, runs of leaf
/// calls of one method, exits by exception, exits of calls never entered
/// and virtual-thread marks.
fn random_blocks(seed: u64) -> Vec<Vec<jlong>> {
    let mut x = seed;
    let mut next = move |n: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut open: Vec<u64> = Vec::new();
    let mut blocks = Vec::new();
    for _ in 0..20 {
        let mut b = Vec::new();
        for _ in 0..(1 + next(300)) {
            let delta = next(40_000);
            match next(10) {
                0..=3 => {
                    let id = next(5);
                    b.push(ev(delta, id, ENTRY));
                    b.push(ev(next(30_000), id, EXIT));
                }
                4 | 5 => {
                    let id = next(8);
                    open.push(id);
                    b.push(ev(delta, id, ENTRY));
                }
                6 | 7 => {
                    if let Some(id) = open.pop() {
                        b.push(ev(delta, id, if next(4) == 0 { 2 } else { EXIT }));
                    }
                }
                8 => b.push(ev(delta, 20 + next(3), EXIT)),
                _ => b.push(ev(delta, 0, VTHREAD_KIND)),
            }
        }
        blocks.push(b);
    }
    blocks
}

#[test]
fn the_plain_loop_tallies_as_the_general_one() {
    for seed in 1..40 {
        let (mut plain, mut general) = (ThreadWatch::default(), ThreadWatch::default());
        let mut base = 1_000;
        for b in random_blocks(seed) {
            let until = plain.observe_plain(&b, base);
            assert!(!general.observe_marked(&b, base, &[], 0));
            assert_eq!(until, general.until, "seed {seed}");
            let ids = |w: &ThreadWatch| w.frames.iter().map(|f| (f.id, f.entry)).collect::<Vec<_>>();
            assert_eq!(ids(&plain), ids(&general), "seed {seed}");
            base = until + 7;
        }
        assert_eq!(tallies(&mut plain), tallies(&mut general), "seed {seed}");
    }
}
