//! [`Symbolizer`]: names the frames of a trace's stacks from what the
//! trace stored at record time (mappings with build ids, kernel symbols,
//! the JVMs' code), so it works after the processes are gone and on
//! another machine whose binaries have the same build ids. Frames are named
//! as async-profiler and FlameGraph name them (docs/REPORT.md "Stacks"); a
//! frame that cannot be named is labelled as such, never guessed. With
//! [`Symbolizer::with_lines`], native frames also carry their source line
//! from DWARF, and functions inlined there are frames of their own
//! (`source_lines`).

use crate::model::event::MethodIdx;
use crate::model::trace::Trace;
use crate::stacks::source_lines::{LineProblems, SourceLines};
use crate::stacks::{JvmCode, RawStack, StackPair, Stacks};
use jtrace_format as fmt;
use jtrace_symbols::access::BinaryAccess;
use jtrace_symbols::bounded_read::refusal;
use jtrace_symbols::codemap::CodeAt;
use jtrace_symbols::elf::{demangle, SymbolTable, PLT};
use jtrace_symbols::lines::{build_id_path, SourceLine};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What kind of code a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// Kernel code (`_[k]`).
    Kernel,
    /// Native code named by its symbol.
    Native,
    /// A JIT-compiled Java method (`_[j]`).
    Jit,
    /// A Java method inlined into compiled code (`_[i]`).
    Inlined,
    /// An interpreted Java method (`_[0]`).
    Interpreted,
    /// A C1-compiled Java method (`_[1]`).
    C1,
    /// Code the JVM generated (stubs, adapters).
    Stub,
    /// Could not be named: the name says why.
    Unresolved,
}

/// One named frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Its name: `package.Class.method` for Java, the (demangled) symbol
    /// for native and kernel code, `[…]` for what could not be named.
    pub name: String,
    /// What it is.
    pub kind: FrameKind,
    /// Its source line (native frames, only when asked for:
    /// [`Symbolizer::with_lines`]).
    pub line: Option<SourceLine>,
    /// A Java frame's method in [`Trace::methods`](crate::Trace::methods)
    /// (with its signature: overloads apart).
    pub method: Option<MethodIdx>,
}

impl Frame {
    /// The name with the FlameGraph / async-profiler suffix of its kind.
    pub fn flame_name(&self) -> String {
        let suffix = match self.kind {
            FrameKind::Kernel => "_[k]",
            FrameKind::Jit => "_[j]",
            FrameKind::Inlined => "_[i]",
            FrameKind::Interpreted => "_[0]",
            FrameKind::C1 => "_[1]",
            _ => "",
        };
        format!("{}{suffix}", self.name)
    }

    /// [`Frame::flame_name`], then ` (file.c:123)` if it has a source line.
    pub fn name_with_line(&self) -> String {
        match &self.line {
            Some(l) => format!("{} ({})", self.flame_name(), l.short()),
            None => self.flame_name(),
        }
    }

    /// A frame without a source line.
    pub fn new(name: String, kind: FrameKind) -> Frame {
        Frame {
            name,
            kind,
            line: None,
            method: None,
        }
    }

    /// The frame of Java method `method`, named `name`.
    fn java(method: MethodIdx, name: String, kind: FrameKind) -> Frame {
        Frame {
            method: Some(method),
            ..Frame::new(name, kind)
        }
    }

    /// Whether it is a Java method.
    pub fn is_java(&self) -> bool {
        matches!(
            self.kind,
            FrameKind::Jit | FrameKind::Inlined | FrameKind::Interpreted | FrameKind::C1
        )
    }

    fn unresolved(name: String) -> Frame {
        Frame::new(name, FrameKind::Unresolved)
    }
}

/// Frame closing a stack whose walk stopped at its depth limit.
pub const TRUNCATED_FRAME: &str = "[truncated]";

/// What could not be named, for `jtrace info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolProblems {
    /// Binaries that were not found (or had another build id).
    pub missing_binaries: BTreeSet<String>,
    /// Binaries without function symbols.
    pub stripped_binaries: BTreeSet<String>,
    /// Binaries found but not read, and why: not a regular file, larger
    /// than jtrace reads of one, tables past its bounds, not ELF.
    pub refused_binaries: BTreeMap<String, String>,
    /// Frames labelled unresolved.
    pub unresolved_frames: u64,
    /// Of those, frames in JIT code that was unloaded (or never reported),
    /// or whose addresses other code took while the stack was in use (one
    /// stack id then stood for frames of two methods).
    pub unloaded_jit_frames: u64,
    /// Stacks cut at the walk's depth limit.
    pub truncated_stacks: u64,
    /// Switch-outs or samples whose stack id has no STACK record (lost).
    pub missing_stacks: u64,
    /// What had no source lines (only looked up with
    /// [`Symbolizer::with_lines`]).
    pub lines: LineProblems,
}

/// A binary found with the recorded build id, and its symbols.
struct Found {
    table: SymbolTable,
    /// Where it was found (its DWARF is read from there).
    path: PathBuf,
}

/// A binary's symbols, looked up once.
type Symbols = Option<Rc<Found>>;

/// Named frames of stacks, by key.
type FrameCache<K> = HashMap<K, Rc<[Frame]>>;

/// Names the frames of a trace's stacks, with caches.
pub struct Symbolizer<'t> {
    trace: &'t Trace,
    binaries: RefCell<HashMap<(String, Vec<u8>), Symbols>>,
    /// By user stack id and whether its innermost pc is exact (not a
    /// return address: a CPU sample taken in user mode).
    user: RefCell<FrameCache<(u32, bool)>>,
    kernel: RefCell<HashMap<u32, Rc<[Frame]>>>,
    problems: RefCell<SymbolProblems>,
    /// Where binaries are looked for besides their recorded paths: the
    /// root of another machine's files (`JTRACE_SYSROOT`), and the
    /// debug directory by build id.
    sysroot: Option<PathBuf>,
    /// Whose rights binaries are opened with: the trace owner's when root
    /// reads another user's trace.
    access: BinaryAccess,
    /// Source lines of native frames, when asked for.
    lines: Option<RefCell<SourceLines>>,
}

impl<'t> Symbolizer<'t> {
    /// A symbolizer for `trace`. Binaries are read from their recorded
    /// paths, under `$JTRACE_SYSROOT` if set, or from
    /// `/usr/lib/debug/.build-id/`, and used only if their build id is the
    /// recorded one. Root opens them with the rights of the trace's owner
    /// ([`BinaryAccess::for_trace`]).
    pub fn new(trace: &'t Trace) -> Symbolizer<'t> {
        Symbolizer {
            trace,
            binaries: Default::default(),
            user: Default::default(),
            kernel: Default::default(),
            problems: Default::default(),
            sysroot: std::env::var_os("JTRACE_SYSROOT").map(PathBuf::from),
            access: BinaryAccess::for_trace(&trace.dir),
            lines: None,
        }
    }

    /// Also gives native frames their source line, with the functions DWARF
    /// says were inlined there as frames of their own (innermost first,
    /// named by DWARF; the outermost keeps its symbol's name). DWARF is
    /// read from each binary, or its separate debug file (by build id or
    /// `.gnu_debuglink`, under `/usr/lib/debug` and the sysroot's), on its
    /// first frame.
    pub fn with_lines(mut self) -> Self {
        self.lines = Some(RefCell::new(SourceLines::new(self.sysroot.as_deref())));
        self
    }

    fn stacks(&self) -> &'t Stacks {
        &self.trace.stacks
    }

    /// The frames of pair `idx` ([`crate::Event::Stack`]), innermost first:
    /// kernel frames, then user frames.
    pub fn frames(&self, idx: u32) -> Vec<Frame> {
        let Some(&p) = self.stacks().pairs.get(idx as usize) else {
            return Vec::new();
        };
        self.pair_frames(p)
    }

    /// The frames of a pair, innermost first.
    pub fn pair_frames(&self, p: StackPair) -> Vec<Frame> {
        let mut out = Vec::new();
        if p.kstack != 0 {
            out.extend(self.kernel_frames(p.kstack).iter().cloned());
        }
        if p.ustack != 0 {
            // No kernel stack: a sample in user mode, at an exact pc.
            let exact_leaf = self.lines.is_some() && p.kstack == 0;
            out.extend(self.user_frames(p.tgid, p.ustack, exact_leaf).iter().cloned());
        }
        out
    }

    /// What could not be named so far.
    pub fn problems(&self) -> SymbolProblems {
        let mut p = self.problems.borrow().clone();
        if let Some(l) = &self.lines {
            p.lines = l.borrow().problems.clone();
        }
        p
    }

    /// Names every stack of the trace (for `jtrace info`'s counts).
    pub fn name_all(&self) {
        for p in &self.stacks().pairs {
            self.pair_frames(*p);
        }
        for &(_, pair) in self.stacks().cpu_samples.keys() {
            self.frames(pair);
        }
    }

    fn kernel_frames(&self, id: u32) -> Rc<[Frame]> {
        if let Some(f) = self.kernel.borrow().get(&id) {
            return f.clone();
        }
        let frames: Rc<[Frame]> = match self.stacks().kernel.get(&id) {
            Some(s) => {
                let mut v: Vec<Frame> = s.stack.frames.iter().map(|f| self.kernel_frame(f.pc)).collect();
                // The tracing machinery itself is not the thread's stack:
                // its innermost frames, and what could not be named among
                // them (a BPF program kallsyms does not list).
                let tracing = |f: &Frame| {
                    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"]
                        .iter()
                        .any(|p| f.name.starts_with(p))
                };
                let lead = v
                    .iter()
                    .take_while(|f| tracing(f) || f.kind == FrameKind::Unresolved)
                    .count();
                let machinery = v[..lead].iter().rposition(tracing).map_or(0, |i| i + 1);
                v.drain(..machinery);
                let unresolved = v.iter().filter(|f| f.kind == FrameKind::Unresolved).count();
                self.problems.borrow_mut().unresolved_frames += unresolved as u64;
                self.close(s, &mut v);
                v.into()
            }
            None => {
                self.problems.borrow_mut().missing_stacks += 1;
                vec![Frame::unresolved("[kernel stack lost]".into())].into()
            }
        };
        self.kernel.borrow_mut().insert(id, frames.clone());
        frames
    }

    /// Counts and marks a truncated stack.
    fn close(&self, s: &RawStack, v: &mut Vec<Frame>) {
        if s.stack.flags & fmt::STACK_TRUNCATED != 0 {
            self.problems.borrow_mut().truncated_stacks += 1;
            v.push(Frame::unresolved(TRUNCATED_FRAME.into()));
        }
    }

    /// The frame of kernel address `pc` (an unresolved one is counted by the caller).
    fn kernel_frame(&self, pc: u64) -> Frame {
        let k = &self.stacks().ksyms;
        let i = k.partition_point(|s| s.start <= pc);
        match i.checked_sub(1).map(|i| &k[i]).filter(|s| pc < s.end) {
            Some(s) => Frame::new(s.name.clone(), FrameKind::Kernel),
            // 0: an address the recorder could not name and kept out
            // (hidden kernel addresses, docs/SECURITY.md).
            None => Frame::unresolved(match pc {
                0 => "[unknown kernel]".into(),
                _ => format!("[unknown kernel {pc:#x}]"),
            }),
        }
    }

    fn user_frames(&self, tgid: u32, id: u32, exact_leaf: bool) -> Rc<[Frame]> {
        if let Some(f) = self.user.borrow().get(&(id, exact_leaf)) {
            return f.clone();
        }
        // Named before with its leaf as a return address: its problems are
        // counted already (only the leaf's line may differ).
        let counted = self
            .user
            .borrow()
            .contains_key(&(id, !exact_leaf))
            .then(|| self.problems.borrow().clone());
        let frames: Rc<[Frame]> = match self.stacks().user.get(&id) {
            Some(s) => {
                let jvm = self
                    .stacks()
                    .jvms
                    .get(&s.stack.tgid)
                    .or_else(|| self.stacks().jvms.get(&tgid));
                let mut v = Vec::new();
                // The pc of the native frame named last, if it was native.
                let mut native_pc = None;
                for (i, f) in s.stack.frames.iter().enumerate() {
                    let at = v.len();
                    self.user_frame(jvm, f, s, exact_leaf && i == 0, &mut v);
                    if let (Some(j), Some(pc), Some(first)) = (jvm, native_pc, v.get(at)) {
                        if let Some(lost) = self.lost_jni_function(j, s, pc, first) {
                            v.insert(at, lost);
                        }
                    }
                    native_pc = (v.last().map(|g: &Frame| g.kind) == Some(FrameKind::Native)).then_some(f.pc);
                }
                self.close(s, &mut v);
                v.into()
            }
            None => {
                self.problems.borrow_mut().missing_stacks += 1;
                vec![Frame::unresolved("[user stack lost]".into())].into()
            }
        };
        if let Some(p) = counted {
            *self.problems.borrow_mut() = p;
        }
        self.user.borrow_mut().insert((id, exact_leaf), frames.clone());
        frames
    }

    /// The frames at one user pc (several for inlined code), innermost
    /// first; `exact`: the pc is not a return address.
    fn user_frame(&self, jvm: Option<&JvmCode>, f: &fmt::StackFrame, s: &RawStack, exact: bool, out: &mut Vec<Frame>) {
        let ts = s.ts;
        let methods = &self.trace.methods;
        let java = |m: u32| methods.get(m as usize).map(|info| (m, info.qualified()));
        if let Some(j) = jvm {
            let i = j.blobs.partition_point(|b| b.start <= f.pc);
            if let Some(b) = i.checked_sub(1).map(|i| &j.blobs[i]).filter(|b| f.pc < b.end) {
                if b.interpreter {
                    match j.methods.at(f.method, ts).and_then(java) {
                        Some((m, name)) => out.push(Frame::java(m, name, FrameKind::Interpreted)),
                        None => {
                            self.problems.borrow_mut().unresolved_frames += 1;
                            out.push(Frame::unresolved("[interpreted: unknown method]".into()));
                        }
                    }
                } else {
                    out.push(Frame::new(b.name.clone(), FrameKind::Stub));
                }
                return;
            }
            let last = self.stacks().user_last_use.get(&s.stack.id).copied().unwrap_or(ts);
            match j.compiled.lookup(f.pc, ts) {
                CodeAt::Live(_) if !j.compiled.stable(f.pc, ts, last.max(ts)) => {
                    let mut p = self.problems.borrow_mut();
                    p.unresolved_frames += 1;
                    p.unloaded_jit_frames += 1;
                    out.push(Frame::unresolved("[JIT code replaced while in use]".into()));
                    return;
                }
                CodeAt::Live(c) => {
                    let outer = if (1..=3).contains(&c.tier) {
                        FrameKind::C1
                    } else {
                        FrameKind::Jit
                    };
                    // The pc's inlining: exact for return addresses.
                    let at = c.inline.binary_search_by_key(&f.pc, |(pc, _)| *pc).ok();
                    match at.map(|i| &c.inline[i].1).filter(|m| !m.is_empty()) {
                        Some(chain) => {
                            for (k, m) in chain.iter().enumerate() {
                                let kind = if k + 1 == chain.len() {
                                    outer
                                } else {
                                    FrameKind::Inlined
                                };
                                match m.and_then(java) {
                                    Some((m, name)) => out.push(Frame::java(m, name, kind)),
                                    None => {
                                        self.problems.borrow_mut().unresolved_frames += 1;
                                        out.push(Frame::unresolved("[compiled: unknown method]".into()));
                                    }
                                }
                            }
                        }
                        None => match c.method.and_then(java) {
                            Some((m, name)) => out.push(Frame::java(m, name, outer)),
                            None => {
                                self.problems.borrow_mut().unresolved_frames += 1;
                                out.push(Frame::unresolved("[compiled: unknown method]".into()));
                            }
                        },
                    }
                    return;
                }
                CodeAt::Stale => {
                    let mut p = self.problems.borrow_mut();
                    p.unresolved_frames += 1;
                    p.unloaded_jit_frames += 1;
                    out.push(Frame::unresolved("[unloaded JIT code]".into()));
                    return;
                }
                CodeAt::None => {}
            }
        }
        self.native_frame(s.stack.tgid, ts, f.pc, exact, out);
    }

    /// The JNI function a native method's frame `java` called, if the walk
    /// lost it: the method is bound to it (NativeMethodBind), and the
    /// native frame inside (at `inner_pc`) is another function, not in
    /// libjvm.so (there the JVM's own code runs: a transition after the
    /// call returned, or a JNI callback, and the function may be gone).
    /// The JVM calls exactly the bound function, so the frame is certain,
    /// not guessed. (The agent reports no native the JVM implements
    /// itself, in libjvm.so, nor its own wrappers.)
    fn lost_jni_function(&self, jvm: &JvmCode, s: &RawStack, inner_pc: u64, java: &Frame) -> Option<Frame> {
        let bound = jvm.natives.get(&java.method.filter(|_| java.is_java())?)?;
        let (inner, inner_at) = self.native_symbol(s.stack.tgid, s.ts, inner_pc);
        let in_jvm = inner_at.is_some_and(|(m, ..)| m.path.ends_with("/libjvm.so"));
        (inner.name != *bound && !in_jvm).then(|| Frame::new(bound.clone(), FrameKind::Native))
    }

    /// A pc in a mapping of the process: its ELF symbol, and with lines
    /// the functions inlined there before it.
    fn native_frame(&self, tgid: u32, ts: u64, pc: u64, exact: bool, out: &mut Vec<Frame>) {
        let (frame, at) = self.native_symbol(tgid, ts, pc);
        match (at, &self.lines) {
            (Some((m, found, off)), Some(lines)) => {
                let dwarf = lines
                    .borrow_mut()
                    .frames(&self.access, &m.path, &m.build_id, &found, off, !exact);
                self.with_inlined(frame, dwarf, out);
            }
            _ => out.push(frame),
        }
    }

    /// `frame` with the line of DWARF's outermost frame, after the frames
    /// inlined into it (innermost first).
    fn with_inlined(&self, mut frame: Frame, dwarf: Vec<jtrace_symbols::lines::LineFrame>, out: &mut Vec<Frame>) {
        let Some((outer, inlined)) = dwarf.split_last() else {
            out.push(frame);
            return;
        };
        for f in inlined {
            let mut inl = match &f.function {
                Some(name) => Frame::new(demangle(name), FrameKind::Native),
                None => {
                    self.problems.borrow_mut().unresolved_frames += 1;
                    Frame::unresolved("[inlined: unknown function]".into())
                }
            };
            inl.line = f.line.clone();
            out.push(inl);
        }
        frame.line = outer.line.clone();
        out.push(frame);
    }

    /// A pc's ELF symbol, and where it is for DWARF: its mapping, the file
    /// found with the mapping's build id, the file offset (none if
    /// unresolved).
    fn native_symbol(&self, tgid: u32, ts: u64, pc: u64) -> (Frame, Option<(&'t fmt::Mapping, PathBuf, u64)>) {
        let stacks = self.stacks();
        let maps = stacks.mappings.get(&tgid).map(Vec::as_slice).unwrap_or(&[]);
        let execs = stacks.execs.get(&tgid).map(Vec::as_slice).unwrap_or(&[]);
        // The latest mapping that holds it, read with no exec since the stack.
        let Some(m) = maps
            .iter()
            .rev()
            .filter(|(read, _)| !execs.iter().any(|&e| ts < e && e <= *read))
            .map(|(_, m)| m)
            .find(|m| m.start <= pc && pc < m.end)
        else {
            self.problems.borrow_mut().unresolved_frames += 1;
            return (Frame::unresolved("[unknown]".into()), None);
        };
        if m.path.is_empty() {
            // Anonymous executable memory: JIT code the JVM did not report.
            self.problems.borrow_mut().unresolved_frames += 1;
            return (Frame::unresolved("[unknown JIT code]".into()), None);
        }
        if m.path.starts_with('[') {
            return (Frame::new(m.path.clone(), FrameKind::Native), None);
        }
        let file = Path::new(&m.path)
            .file_name()
            .map_or(m.path.clone(), |n| n.to_string_lossy().into_owned());
        let off = pc - m.start + m.offset;
        let Some(bin) = self.binary(&m.path, &m.build_id) else {
            self.problems.borrow_mut().unresolved_frames += 1;
            return (Frame::unresolved(format!("[{file}+{off:#x}]")), None);
        };
        let syms = &bin.table;
        match syms.vaddr_of_offset(off).and_then(|va| syms.lookup(va)) {
            // A PLT stub: named by its file (`libc.so.6@plt`), as no symbol covers it.
            Some((PLT, _)) => (
                Frame::new(format!("{file}{PLT}"), FrameKind::Native),
                Some((m, bin.path.clone(), off)),
            ),
            Some((name, _)) => (
                Frame::new(demangle(name), FrameKind::Native),
                Some((m, bin.path.clone(), off)),
            ),
            None => {
                self.problems.borrow_mut().unresolved_frames += 1;
                (Frame::unresolved(format!("[{file}+{off:#x}]")), None)
            }
        }
    }

    /// The symbols of the file at `c`, opened with the viewer's rights:
    /// `Ok(None)` if it cannot be opened, whatever the reason (a file the
    /// viewer may not open reads as one not there); `Err(why)` if it was
    /// opened but refused or is no ELF file.
    fn symbols_of(&self, c: &Path) -> Result<Option<SymbolTable>, String> {
        let file = match self.access.open(c) {
            Ok(file) => file,
            Err(e) if refusal(&e).is_some() => return Err(format!("{}: {e}", c.display())),
            Err(_) => return Ok(None),
        };
        SymbolTable::load_file(&file, c).map(Some).map_err(|e| format!("{e:#}"))
    }

    /// The symbols of the binary recorded at `path` with `build_id`: the
    /// file there (under the sysroot if set) or in the build-id debug
    /// directory, if its build id matches.
    fn binary(&self, path: &str, build_id: &[u8]) -> Symbols {
        let key = (path.to_string(), build_id.to_vec());
        if let Some(s) = self.binaries.borrow().get(&key) {
            return s.clone();
        }
        let mut candidates = Vec::new();
        if let Some(root) = &self.sysroot {
            candidates.push(root.join(path.trim_start_matches('/')));
        }
        candidates.push(PathBuf::from(path));
        let debug_root = Path::new("/usr/lib/debug");
        candidates.extend(build_id_path(debug_root, build_id));
        // Why the first file opened was not read, if none is found.
        let mut refused = None;
        let mut load = |c: &PathBuf, build_id: &[u8]| {
            let t = match self.symbols_of(c) {
                Ok(t) => t?,
                Err(why) => {
                    refused.get_or_insert(why);
                    return None;
                }
            };
            let same = build_id.is_empty() || t.build_id.as_deref() == Some(build_id);
            same.then_some(t)
        };
        let mut found = candidates
            .iter()
            .find_map(|c| load(c, build_id).map(|table| Found { table, path: c.clone() }));
        // The binary found, its debug file's symbols too (functions a
        // library does not export: libc's futex waits, say), by the
        // recorded build id or, for a mapping recorded without one, the
        // binary's own.
        if let Some(f) = &mut found {
            let id = if build_id.is_empty() {
                f.table.build_id.clone().unwrap_or_default()
            } else {
                build_id.to_vec()
            };
            if let Some(d) = build_id_path(debug_root, &id).filter(|d| f.path != *d) {
                if let Some(debug) = load(&d, &id) {
                    f.table.add_debug_symbols(debug);
                }
            }
        }
        let result = match found {
            Some(f) if f.table.is_empty() => {
                self.problems.borrow_mut().stripped_binaries.insert(path.to_string());
                None
            }
            Some(f) => Some(Rc::new(f)),
            None => {
                let mut p = self.problems.borrow_mut();
                if let Some(why) = refused {
                    p.refused_binaries.insert(path.to_string(), why);
                } else {
                    p.missing_binaries.insert(path.to_string());
                }
                None
            }
        };
        self.binaries.borrow_mut().insert(key, result.clone());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtrace_symbols::elf::build_id;

    /// A mapping recorded without a build id (its file could not be read
    /// then) still gets the debug file's symbols, by the binary's own
    /// build id: libc's unexported functions (`clone3`, the futex waits)
    /// are only there (libc6-dbg, which scripts/setup.sh installs).
    #[test]
    fn a_binary_recorded_without_a_build_id_gets_its_debug_files_symbols() {
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let id = build_id(Path::new(libc)).unwrap().expect("libc has a build id");
        let debug = build_id_path(Path::new("/usr/lib/debug"), &id).unwrap();
        assert!(
            debug.exists(),
            "{} missing: install libc6-dbg (scripts/setup.sh)",
            debug.display()
        );
        let exported = SymbolTable::load(Path::new(libc)).unwrap().len();
        let trace = Trace::default();
        let s = Symbolizer::new(&trace);
        let with_id = s.binary(libc, &id).expect("libc read").table.len();
        let without_id = s.binary(libc, &[]).expect("libc read").table.len();
        assert!(
            with_id > exported,
            "the debug file adds symbols: {with_id} against {exported}"
        );
        assert_eq!(without_id, with_id);
    }
}
