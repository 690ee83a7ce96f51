//! The Parquet export's waker methods, filled in after its one walk: every
//! `wakeups` row names the method the whole-trace index
//! ([`CallIndex::method_at`]) gives for its waker at its time, every
//! `off_cpu_intervals` row ended by a wakeup names that wakeup's, over
//! several row groups of each table; and the files are byte for byte the
//! same whether the walk's events, queries and answers stay in memory or
//! spill to many sorted runs.

use jtrace_testkit::synth;

use jtrace_merge::stream::StreamOptions;
use jtrace_merge::{CallIndex, Trace};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use std::collections::HashMap;
use std::path::Path;

/// Every row of a table, as (column name → value).
fn rows(path: &Path) -> Vec<HashMap<String, Option<i64>>> {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let field = |f: &Field| match f {
        Field::Long(v) => Some(*v),
        _ => None,
    };
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r: Result<Row, _>| {
            r.unwrap()
                .get_column_iter()
                .map(|(name, f)| (name.clone(), field(f)))
                .collect()
        })
        .collect()
}

#[test]
fn waker_methods_filled_after_the_walk_are_the_call_index_s() {
    let base = std::env::temp_dir().join(format!("jtrace-parquet-wakers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("t.jtrace");
    synth::generate(&dir, 1_000_000, 8).unwrap();
    let trace = Trace::open(&dir).unwrap();
    let index = CallIndex::build(&trace);

    let mut files: Vec<HashMap<String, Vec<u8>>> = Vec::new();
    for budget in [256 << 20, 256 << 10] {
        let out = base.join(format!("tables-{budget}"));
        let opts = StreamOptions {
            memory_budget: budget,
            ..Default::default()
        };
        jtrace_timeline::write_parquet(&dir, &out, &opts).unwrap();
        files.push(
            ["wakeups", "off_cpu_intervals", "invocations", "threads"]
                .iter()
                .map(|t| (t.to_string(), std::fs::read(out.join(format!("{t}.parquet"))).unwrap()))
                .collect(),
        );
        if files.len() > 1 {
            continue;
        }
        let wakeups = rows(&out.join("wakeups.parquet"));
        assert!(
            wakeups.len() > 65536,
            "{} wakeups: more than a row group",
            wakeups.len()
        );
        // The method of the latest wakeup of each (thread, time).
        let mut latest = HashMap::new();
        let mut named = 0;
        for w in &wakeups {
            let (tid, ts, waker) = (w["tid"].unwrap(), w["ts_ns"].unwrap(), w["waker_tid"].unwrap());
            let want = index.method_at(waker as u32, ts as u64).map(i64::from);
            assert_eq!(w["waker_method_id"], want, "wakeup of {tid} by {waker} at {ts}");
            named += want.is_some() as usize;
            latest.insert((tid, ts), want);
        }
        assert!(
            named > wakeups.len() / 10,
            "{named} of {} wakers in a method",
            wakeups.len()
        );
        let off = rows(&out.join("off_cpu_intervals.parquet"));
        assert!(off.len() > 65536, "{} intervals: more than a row group", off.len());
        let mut woken = 0;
        for o in &off {
            let want = o["wake_ns"].and_then(|ts| latest[&(o["tid"].unwrap(), ts)]);
            assert_eq!(
                o["waker_method_id"], want,
                "interval of {:?} at {:?}",
                o["tid"], o["start_ns"]
            );
            woken += want.is_some() as usize;
        }
        assert!(
            woken > off.len() / 10,
            "{woken} of {} intervals ended by a waker in a method",
            off.len()
        );
    }
    assert!(files[0] == files[1], "the tables differ with the budget");
    std::fs::remove_dir_all(&base).unwrap();
}
