//! The tables of a pprof profile: strings, functions and locations, each
//! made once (interned) and referred to by index or id, and how a stack
//! becomes locations.

use super::proto::{Function, Line, Location};
use jtrace_merge::{Frame, FrameKind, MethodInfo};
use std::collections::HashMap;

/// The function standing for "no traced method open" in a stack of
/// traced methods.
pub(super) const NO_TRACED_METHOD: &str = "(no traced method)";

/// Strings, functions and locations of a profile.
#[derive(Default)]
pub(super) struct Tables {
    /// The string table (index 0 is "", as pprof requires).
    pub strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    /// Functions, id = index + 1.
    pub functions: Vec<Function>,
    function_ids: HashMap<(i64, i64, i64), u64>,
    /// Locations, id = index + 1.
    pub locations: Vec<Location>,
    location_ids: HashMap<Vec<(u64, i64)>, u64>,
}

impl Tables {
    /// Empty tables.
    pub fn new() -> Tables {
        let mut t = Tables::default();
        t.string("");
        t
    }

    /// The index of `s` in the string table.
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    /// The id of the function with these names.
    fn function(&mut self, name: &str, system_name: &str, filename: &str) -> u64 {
        let key = (self.string(name), self.string(system_name), self.string(filename));
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(Function {
            id,
            name: key.0,
            system_name: key.1,
            filename: key.2,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The id of the location whose lines are these (function, source
    /// line; 0: not known), innermost first: the last is the caller the
    /// others were inlined into.
    fn location(&mut self, lines: Vec<(u64, i64)>) -> u64 {
        if let Some(&id) = self.location_ids.get(&lines) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            line: lines
                .iter()
                .map(|&(function_id, line)| Line { function_id, line })
                .collect(),
        });
        self.location_ids.insert(lines, id);
        id
    }

    /// The function of a recorded frame: named as the collapsed export
    /// names it (`_[j]`, `_[k]` … suffixes), its plain name as system
    /// name, and a Java method's class or a native frame's source file
    /// (when its line was read) as file name; with its source line (0:
    /// not known).
    fn frame_function(&mut self, f: &Frame) -> (u64, i64) {
        let file = match (f.is_java(), &f.line) {
            (true, _) => f.name.rsplit_once('.').map_or("", |(c, _)| c),
            (false, Some(l)) => l.file.as_str(),
            (false, None) => "",
        };
        let line = f.line.as_ref().map_or(0, |l| i64::from(l.line));
        (self.function(&f.flame_name(), &f.name, file), line)
    }

    /// The locations of a recorded stack (frames innermost first), leaf
    /// first. Inlined frames (`_[i]`) and the compiled frame they were
    /// inlined into share one location, one line each, as pprof writes
    /// inlining; a run of inlined frames not closed by a compiled one
    /// (its method could not be named) keeps one location per frame.
    pub fn recorded(&mut self, frames: &[Frame]) -> Vec<u64> {
        let mut out = Vec::with_capacity(frames.len());
        let mut i = 0;
        while i < frames.len() {
            let run = frames[i..].iter().take_while(|f| f.kind == FrameKind::Inlined).count();
            let closer = frames
                .get(i + run)
                .filter(|f| matches!(f.kind, FrameKind::Jit | FrameKind::C1));
            let end = match (run, closer) {
                (1.., Some(_)) => i + run + 1,
                (1.., None) => {
                    for f in &frames[i..i + run] {
                        let func = self.frame_function(f);
                        out.push(self.location(vec![func]));
                    }
                    i += run;
                    continue;
                }
                (0, _) => i + 1,
            };
            let lines = frames[i..end].iter().map(|f| self.frame_function(f)).collect();
            out.push(self.location(lines));
            i = end;
        }
        out
    }

    /// The locations of a stack of traced methods (outermost first, as
    /// the walk keeps it), leaf first; no method: [`NO_TRACED_METHOD`].
    pub fn traced(&mut self, methods: &[MethodInfo], stack: &[u32]) -> Vec<u64> {
        if stack.is_empty() {
            let f = self.function(NO_TRACED_METHOD, NO_TRACED_METHOD, "");
            return vec![self.location(vec![(f, 0)])];
        }
        stack
            .iter()
            .rev()
            .map(|&m| {
                let m = &methods[m as usize];
                let q = m.qualified();
                let f = self.function(&q, &format!("{q}{}", m.signature), &m.class);
                self.location(vec![(f, 0)])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, kind: FrameKind) -> Frame {
        Frame::new(name.into(), kind)
    }

    fn lines(t: &Tables, loc: u64) -> Vec<String> {
        t.locations[loc as usize - 1]
            .line
            .iter()
            .map(|l| t.strings[t.functions[l.function_id as usize - 1].name as usize].clone())
            .collect()
    }

    #[test]
    fn inlined_frames_share_the_location_of_their_compiled_caller() {
        let mut t = Tables::new();
        let frames = [
            frame("futex_wait", FrameKind::Kernel),
            frame("Unsafe_Park", FrameKind::Native),
            frame("a.B.inner", FrameKind::Inlined),
            frame("a.B.middle", FrameKind::Inlined),
            frame("a.B.outer", FrameKind::Jit),
            frame("a.B.lost", FrameKind::Inlined),
            frame("[compiled: unknown method]", FrameKind::Unresolved),
            frame("a.B.main", FrameKind::Interpreted),
        ];
        let locs = t.recorded(&frames);
        let got: Vec<Vec<String>> = locs.iter().map(|&l| lines(&t, l)).collect();
        assert_eq!(
            got,
            vec![
                vec!["futex_wait_[k]".to_string()],
                vec!["Unsafe_Park".into()],
                vec!["a.B.inner_[i]".into(), "a.B.middle_[i]".into(), "a.B.outer_[j]".into()],
                vec!["a.B.lost_[i]".into()],
                vec!["[compiled: unknown method]".into()],
                vec!["a.B.main_[0]".into()],
            ]
        );
        // The same frames again: the same locations, nothing added.
        let n = (t.functions.len(), t.locations.len(), t.strings.len());
        assert_eq!(t.recorded(&frames), locs);
        assert_eq!(n, (t.functions.len(), t.locations.len(), t.strings.len()));
        // A Java frame's file is its class; its system name has no suffix.
        let main = &t.functions[t.locations[locs[5] as usize - 1].line[0].function_id as usize - 1];
        assert_eq!(t.strings[main.filename as usize], "a.B");
        assert_eq!(t.strings[main.system_name as usize], "a.B.main");
    }
}
