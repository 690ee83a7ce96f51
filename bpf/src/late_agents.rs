//! Agent libraries probed while recording. The agent's announcement
//! functions are probed by inode: a JVM in a container loads its own copy
//! of the agent (src/container.rs of the CLI), which the uprobes on
//! [`crate::RecorderConfig::agent_library`] do not reach, so that its
//! stacks' Java frames would stay unnamed. [`crate::KernelRecorder::probe_agent`]
//! has the consumer attach the hooks to such a copy, before the JVM loads
//! it; each file once.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use anyhow::Result;
use libbpf_rs::Link;

use crate::{setup, skel};

/// A library to probe, and where to say how it went.
pub(crate) type Request = (PathBuf, mpsc::Sender<Result<()>>);

/// The requests not yet served.
pub(crate) type Requests = Arc<Mutex<Vec<Request>>>;

/// The consumer's side.
pub(crate) struct LateAgents {
    requests: Requests,
    /// Whether the hooks' programs are loaded (stacks are recorded).
    hooks: bool,
    /// The files probed, by (device, inode).
    probed: HashSet<(u64, u64)>,
}

impl LateAgents {
    /// After the start, which probed `first` (if the hooks are loaded).
    pub(crate) fn new(requests: Requests, hooks: bool, first: Option<&Path>) -> LateAgents {
        LateAgents {
            requests,
            hooks,
            probed: first.and_then(file_id).into_iter().collect(),
        }
    }

    /// Serves the requests made since the last call; the links join `links`.
    pub(crate) fn poll(&mut self, sk: &skel::JtraceSkel<'_>, links: &mut Vec<Link>) {
        let requests = std::mem::take(&mut *self.requests.lock().unwrap_or_else(|e| e.into_inner()));
        for (library, reply) in requests {
            let done = match file_id(&library) {
                _ if !self.hooks => Ok(()),
                Some(id) if self.probed.contains(&id) => Ok(()),
                id => setup::attach_agent_hooks_late(sk, &library).map(|new| {
                    links.extend(new);
                    self.probed.extend(id);
                }),
            };
            let _ = reply.send(done);
        }
    }
}

/// (device, inode) of the file at `path`.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}
