//! The processes' memory maps read with the viewer's rights: a thread of
//! the recorder that has taken the viewer's user and group for good, so
//! that the kernel itself decides whether they may read a process's
//! `/proc/PID/maps` (ptrace_may_access, checked against the credentials
//! of the process at that moment, under the kernel's exec lock). A
//! process that became a setuid program's after the stack that asked for
//! it is then refused, not read by root (docs/SECURITY.md, "What a trace
//! reveals").

use std::sync::mpsc::{channel, Receiver, Sender};

use rustix::process::{Gid, Uid};

use crate::Viewer;

/// The thread that reads as the viewer.
pub(crate) struct ViewerReader {
    ask: Option<Sender<String>>,
    answers: Receiver<std::io::Result<String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ViewerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ViewerReader")
    }
}

impl ViewerReader {
    /// Starts the thread, which takes `viewer`'s identity (its group as
    /// its only group). If it cannot, every read is refused.
    pub(crate) fn start(viewer: &Viewer) -> std::io::Result<ViewerReader> {
        let (ask, questions) = channel::<String>();
        let (reply, answers) = channel();
        let (uid, gid) = (Uid::from_raw(viewer.uid), Gid::from_raw(viewer.gid));
        let thread = std::thread::Builder::new()
            .name("jtrace-viewer".into())
            .spawn(move || {
                let became = become_user(uid, gid);
                for path in questions {
                    let answer = match &became {
                        Ok(()) => std::fs::read_to_string(&path),
                        Err(e) => Err(std::io::Error::new(
                            std::io::ErrorKind::PermissionDenied,
                            format!("cannot take the viewer's identity: {e}"),
                        )),
                    };
                    if reply.send(answer).is_err() {
                        return;
                    }
                }
            })?;
        Ok(ViewerReader {
            ask: Some(ask),
            answers,
            thread: Some(thread),
        })
    }

    /// The text of the file at `path`, read by the viewer.
    pub(crate) fn read(&self, path: String) -> std::io::Result<String> {
        let gone = || std::io::Error::other("the viewer's reader is gone");
        self.ask.as_ref().ok_or_else(gone)?.send(path).map_err(|_| gone())?;
        self.answers.recv().map_err(|_| gone())?
    }
}

impl Drop for ViewerReader {
    fn drop(&mut self) {
        // Its questions end: the thread returns.
        drop(self.ask.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// This thread becomes `uid`/`gid` for good (raw syscalls: only this
/// thread), which leaves it no capability.
fn become_user(uid: Uid, gid: Gid) -> rustix::io::Result<()> {
    rustix::thread::set_thread_groups(&[gid])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The viewer reads what they may: a process of root's is refused (as
    /// root, every one is read).
    #[test]
    #[cfg_attr(not(feature = "system-tests"), ignore = "needs root (to take another identity)")]
    fn another_users_maps_are_refused() {
        let nobody = Viewer {
            uid: 65534,
            gid: 65534,
            kernel_addresses: false,
        };
        let r = ViewerReader::start(&nobody).unwrap();
        // Root's process (not this one: a thread reads its own process's).
        let mut root = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let maps = format!("/proc/{}/maps", root.id());
        let e = r.read(maps.clone()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        assert!(std::fs::read_to_string(&maps).unwrap().contains("[stack]"));
        // What every user may read, it reads.
        assert!(r.read("/proc/version".into()).is_ok());
        root.kill().unwrap();
        root.wait().unwrap();
        drop(r);
    }
}
