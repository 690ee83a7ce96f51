//! One CSV row as bytes, written straight into a buffer: numbers through
//! `itoa`, each thread's and method's text quoted once (by the `csv`
//! crate) and reused. A row built as strings and written through
//! `csv::Writer::write_record` cost ≈ 30 allocations; the export took
//! ≈ 1.4 µs a row that way (BENCHMARKS.md, "Exports against `report`").

use crate::model::Span;
use crate::process::pid_of;
use jtrace_merge::{Cause, ThreadInfo, Trace};

/// Appends the text `field` to `out` as the `csv` crate writes it inside
/// a record (quoted when it holds `,`, `"`, `\r` or `\n`, its quotes
/// doubled), neutralised first if a spreadsheet would take it for a
/// formula ([`neutralised`]).
pub(super) fn push_field(out: &mut Vec<u8>, field: &str) {
    // Alone in a record an empty field would be written `""`; in a row of
    // many it is nothing.
    if field.is_empty() {
        return;
    }
    let field = neutralised(field);
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail.
    w.write_record([field.as_ref()]).expect("CSV into memory");
    let record = w.into_inner().expect("CSV into memory");
    out.extend_from_slice(record.strip_suffix(b"\n").unwrap_or(&record));
}

/// A text cell as a spreadsheet may read it without running it: one that
/// begins with `=`, `+`, `-`, `@`, a tab or a carriage return (a thread
/// or method name the traced program chose, such as `=HYPERLINK(…)`)
/// gets a leading `'`, as OWASP's advice on CSV injection says
/// (docs/EXPORTS.md). Numbers are not text cells and are written as they are.
pub(super) fn neutralised(field: &str) -> std::borrow::Cow<'_, str> {
    match field.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => format!("'{field}").into(),
        _ => field.into(),
    }
}

/// Formats the rows of one trace's invocations.
pub(super) struct RowBytes<'a> {
    trace: &'a Trace,
    /// Per method index: its `class,method,signature,` fields, escaped.
    methods: Vec<Option<Box<[u8]>>>,
    /// The current thread's `tid,pid,thread,` fields, escaped.
    thread: Vec<u8>,
    num: itoa::Buffer,
}

impl<'a> RowBytes<'a> {
    /// A formatter of `trace`'s rows.
    pub(super) fn new(trace: &'a Trace) -> Self {
        RowBytes {
            trace,
            methods: Vec::new(),
            thread: Vec::new(),
            num: itoa::Buffer::new(),
        }
    }

    /// The rows that follow are of thread `t`.
    pub(super) fn thread(&mut self, t: &ThreadInfo) {
        self.thread.clear();
        self.thread.extend_from_slice(self.num.format(t.tid).as_bytes());
        self.thread.push(b',');
        self.thread
            .extend_from_slice(self.num.format(pid_of(self.trace, t)).as_bytes());
        self.thread.push(b',');
        push_field(&mut self.thread, t.display_name());
        self.thread.push(b',');
    }

    /// Appends the row of invocation `s` of thread `t` (the thread of the
    /// last [`RowBytes::thread`]), its terminator included, in
    /// [`super::CSV_COLUMNS`] order.
    pub(super) fn row(&mut self, t: &ThreadInfo, s: &Span, out: &mut Vec<u8>) {
        let trace = self.trace;
        let m = &trace.methods[s.inv.method as usize];
        let b = &s.inv.breakdown;
        out.extend_from_slice(&self.thread);
        let i = s.inv.method as usize;
        if i >= self.methods.len() {
            self.methods.resize(i + 1, None);
        }
        let fields = self.methods[i].get_or_insert_with(|| {
            let mut f = Vec::new();
            for text in [&m.class, &m.name, &m.signature] {
                push_field(&mut f, text);
                f.push(b',');
            }
            f.into_boxed_slice()
        });
        out.extend_from_slice(fields);
        let mut num = |out: &mut Vec<u8>, v: u64| {
            out.extend_from_slice(self.num.format(v).as_bytes());
            out.push(b',');
        };
        for v in [s.inv.entry, s.inv.exit, b.wall, b.cpu, b.off.total()] {
            num(out, v);
        }
        for c in Cause::ALL {
            num(out, b.off.get(c));
        }
        num(out, b.voluntary);
        num(out, b.involuntary);
        let flag = |out: &mut Vec<u8>, v: bool| out.extend_from_slice(if v { b"true," } else { b"false," });
        flag(out, s.inv.exception);
        num(out, s.depth as u64);
        flag(out, s.inv.outermost);
        flag(out, s.inv.unfinished);
        flag(out, m.native);
        let compiled = (!m.native)
            .then(|| trace.jit.compiled_at(pid_of(trace, t), s.inv.method, s.inv.entry))
            .flatten();
        match compiled {
            Some(c) => flag(out, c),
            None => out.push(b','),
        }
        out.extend_from_slice(self.num.format(b.not_covered).as_bytes());
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::push_field;

    /// Names a spreadsheet would run as formulas are written as text.
    #[test]
    fn formula_like_names_are_neutralised() {
        for (name, cell) in [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"",
            ),
            ("+1+2", "'+1+2"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
            ("\tcmd", "'\tcmd"),
            ("\rcmd", "\"'\rcmd\""),
            ("main", "main"),
            ("a=b", "a=b"),
        ] {
            let mut got = Vec::new();
            push_field(&mut got, name);
            assert_eq!(String::from_utf8_lossy(&got), cell, "{name:?}");
        }
    }

    /// The `csv` crate's writer is the reference: each field between two
    /// plain ones comes out the same.
    #[test]
    fn fields_are_quoted_as_the_csv_crate_quotes_them() {
        for field in [
            "plain",
            "",
            "a,b",
            "say \"hi\"",
            "\"",
            "line\nbreak",
            "cr\rhere",
            "pool-1-thread-1",
            "(Ljava/lang/String;I)V",
            "Ünïcödé, ok",
            "=HYPERLINK(\"http://x\",\"y\")",
        ] {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(["x", &super::neutralised(field), "y"]).unwrap();
            let want = w.into_inner().unwrap();
            let mut got = b"x,".to_vec();
            push_field(&mut got, field);
            got.extend_from_slice(b",y\n");
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{field:?}"
            );
        }
    }
}
