//! Source lines of native frames, for the [`crate::Symbolizer`] when a view
//! asks for them (`--lines`): each binary's DWARF ([`DebugLines`]) loaded
//! once, on its first frame, from the file the symbolizer found and checked
//! (re-checked by build id when opened again), or its separate debug file.
//! What has no lines is counted ([`LineProblems`]); a line is never guessed.

use jtrace_symbols::access::BinaryAccess;
use jtrace_symbols::lines::{Binary, DebugLines, LineFrame, ReadBudget, DEBUG_ROOT};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What had no source lines, for `jtrace info --lines`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineProblems {
    /// Binaries (as recorded) whose frames have no lines, and why: no
    /// DWARF in them or in a debug file, or DWARF that could not be read
    /// (another build id than the recorded one, say).
    pub binaries_without_lines: BTreeMap<String, String>,
    /// Native frames in binaries with DWARF whose address no line covers.
    pub frames_without_line: u64,
}

/// The DWARF of the binaries a trace's stacks name, loaded lazily.
pub(crate) struct SourceLines {
    loaded: HashMap<(String, Vec<u8>), Option<Rc<DebugLines>>>,
    /// Where separate debug files are looked for.
    roots: Vec<PathBuf>,
    /// What the DWARF of all of them may copy into memory.
    budget: ReadBudget,
    pub(crate) problems: LineProblems,
}

impl SourceLines {
    /// Debug files under [`DEBUG_ROOT`], and first under it within `sysroot`.
    pub(crate) fn new(sysroot: Option<&Path>) -> SourceLines {
        let mut roots = Vec::new();
        if let Some(r) = sysroot {
            roots.push(r.join(DEBUG_ROOT.trim_start_matches('/')));
        }
        roots.push(PathBuf::from(DEBUG_ROOT));
        SourceLines {
            loaded: HashMap::new(),
            roots,
            budget: ReadBudget::default(),
            problems: LineProblems::default(),
        }
    }

    /// The frames DWARF gives at file offset `off` of the binary recorded
    /// at `recorded` with `build_id`, found at `found`: innermost first,
    /// empty when there are none (counted).
    pub(crate) fn frames(
        &mut self,
        access: &BinaryAccess,
        recorded: &str,
        build_id: &[u8],
        found: &Path,
        off: u64,
        return_address: bool,
    ) -> Vec<LineFrame> {
        let key = (recorded.to_string(), build_id.to_vec());
        let lines = match self.loaded.get(&key) {
            Some(l) => l.clone(),
            None => {
                let l = self.load(access, recorded, build_id, found);
                self.loaded.insert(key, l.clone());
                l
            }
        };
        let Some(lines) = lines else {
            return Vec::new();
        };
        let frames = lines.frames_at_offset(off, return_address);
        if !frames.iter().any(|f| f.line.is_some()) {
            self.problems.frames_without_line += 1;
            return Vec::new();
        }
        frames
    }

    fn load(&mut self, access: &BinaryAccess, recorded: &str, build_id: &[u8], found: &Path) -> Option<Rc<DebugLines>> {
        let why = match access.open(found) {
            Ok(file) => {
                let bin = Binary {
                    file: &file,
                    path: found,
                    recorded: Path::new(recorded),
                    build_id,
                };
                match DebugLines::load(&bin, &self.roots, &|p| access.open(p), &self.budget) {
                    Ok(Some(l)) => return Some(Rc::new(l)),
                    Ok(None) => "no DWARF line info (in it or a debug file)".to_string(),
                    Err(e) => format!("DWARF not read: {e:#}"),
                }
            }
            Err(e) => format!("{}: {e}", found.display()),
        };
        self.problems.binaries_without_lines.insert(recorded.to_string(), why);
        None
    }
}
