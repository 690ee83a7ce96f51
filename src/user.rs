//! Whose rights an action runs with. jtrace runs as root next to files that
//! other users control: it reads, creates and removes them with those users'
//! credentials (docs/ARCHITECTURE.md invariant 6), and starts the traced command as the
//! invoking user, with that user's supplementary groups.

use anyhow::{bail, Context};
use jtrace_symbols::access::Credentials;
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
use std::fs::File;
use std::path::Path;

/// A user's credentials: user, primary group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    /// User id.
    pub(crate) uid: Uid,
    /// Primary group id.
    pub(crate) gid: Gid,
    /// Supplementary group ids.
    pub(crate) groups: Vec<Gid>,
}

impl User {
    /// The user who invoked jtrace: when it runs as root, SUDO_UID and
    /// SUDO_GID, with the groups of that account as a login gives them
    /// ([`Credentials::sudo_user`]); else (no sudo, or jtrace not root:
    /// SUDO_UID left in the environment names someone jtrace cannot act
    /// as) jtrace's own user, group and groups.
    pub(crate) fn invoking() -> anyhow::Result<User> {
        match Credentials::sudo_user()? {
            Some(c) => Ok(User {
                uid: Uid::from_raw(c.uid),
                gid: Gid::from_raw(c.gid),
                groups: c.groups.into_iter().map(Gid::from_raw).collect(),
            }),
            None => User::current(),
        }
    }

    /// jtrace's own user, group and groups.
    pub(crate) fn current() -> anyhow::Result<User> {
        Ok(User {
            uid: rustix::process::getuid(),
            gid: rustix::process::getgid(),
            groups: rustix::process::getgroups().context("cannot read jtrace's own groups")?,
        })
    }

    /// The effective user, group and supplementary groups of a process,
    /// from its `/proc/PID/status` text; None if a line is missing.
    pub(crate) fn from_proc_status(status: &str) -> Option<User> {
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
        // Uid: and Gid: list real, effective, saved and file-system ids.
        let effective = |key: &str| -> Option<u32> { field(key)?.split_whitespace().nth(1)?.parse().ok() };
        let groups = field("Groups:")?
            .split_whitespace()
            .map(|g| g.parse().ok().map(Gid::from_raw))
            .collect::<Option<Vec<Gid>>>()?;
        Some(User {
            uid: Uid::from_raw(effective("Uid:")?),
            gid: Gid::from_raw(effective("Gid:")?),
            groups,
        })
    }

    /// Whether jtrace itself runs as this user and group, so that a child
    /// needs no change of identity.
    pub(crate) fn is_current(&self) -> bool {
        self.uid == rustix::process::getuid() && self.gid == rustix::process::getgid()
    }

    /// Runs `f` on a thread of its own whose effective user, group and
    /// groups are this user's: files it opens or creates are checked against
    /// and owned by this user, and a JVM accepts it as a peer. Only that
    /// thread changes identity (raw syscalls, not glibc's process-wide
    /// wrappers); needs root unless the user is jtrace's own.
    pub(crate) fn run_as<T: Send>(&self, f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
        use rustix::process::{getegid, geteuid};
        if !geteuid().is_root() {
            // Without root no identity can be taken (not even one's own
            // groups set): jtrace acts as itself, or not at all.
            if self.uid == geteuid() && self.gid == getegid() {
                return f();
            }
            bail!(
                "jtrace runs as uid {} and cannot act as uid {} (that needs root)",
                geteuid().as_raw(),
                self.uid.as_raw()
            );
        }
        self.credentials().run_as(f)
    }

    /// This user's credentials, as the thread that takes them wants them.
    fn credentials(&self) -> Credentials {
        Credentials {
            uid: self.uid.as_raw(),
            gid: self.gid.as_raw(),
            groups: self.groups.iter().map(|g| g.as_raw()).collect(),
        }
    }

    /// Opens `path` for reading with this user's rights ([`User::run_as`]):
    /// a file the user names on the command line, which root must not open
    /// for them. Opened without blocking (a FIFO or a device does not hang
    /// jtrace) and only if it is a regular file; links are followed, as the
    /// user's own open follows them. The error is that open's ("cannot open
    /// X as uid U: Permission denied"): a path in a directory the user
    /// cannot search reads the same whether or not a file is there, so no
    /// answer tells the user more than their own open would.
    pub(crate) fn open_file(&self, path: &Path) -> anyhow::Result<File> {
        self.run_as(|| {
            jtrace_symbols::bounded_read::open_regular(path)
                .with_context(|| format!("cannot open {} as uid {}", path.display(), self.uid.as_raw()))
        })
    }

    /// Takes this user's identity for good, in a forked child before it
    /// execs: supplementary groups first, then the group, then the user
    /// (after which the others could not change any more). Every step is
    /// checked; allocation-free, as the child of a threaded process must be.
    pub(crate) fn become_for_exec(&self) -> std::io::Result<()> {
        set_thread_groups(&self.groups)?;
        set_thread_res_gid(self.gid, self.gid, self.gid)?;
        set_thread_res_uid(self.uid, self.uid, self.uid)?;
        Ok(())
    }

    /// Checks that this user may trace process `pid`: root may trace any
    /// process; anyone else only one the kernel lets them read as a
    /// debugger would (`ptrace_may_access` in PTRACE_MODE_READ: the same
    /// user and a dumpable process, or the capability in its user
    /// namespace, as a rootless container's owner has). The kernel is
    /// asked directly: its answer to this user's reading of
    /// `/proc/PID/ns/pid`.
    pub(crate) fn check_may_trace(&self, pid: u32) -> anyhow::Result<()> {
        if self.uid.is_root() {
            return Ok(());
        }
        let link = format!("/proc/{pid}/ns/pid");
        let asked = self.run_as(|| Ok(rustix::fs::readlinkat(rustix::fs::CWD, link.as_str(), Vec::new())));
        match asked? {
            Ok(_) => Ok(()),
            Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::SRCH) => bail!("no process with pid {pid}"),
            Err(e) => {
                let owner = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| User::from_proc_status(&s))
                    .map_or_else(|| "another user".to_string(), |u| format!("uid {}", u.uid.as_raw()));
                bail!(
                    "uid {uid} may not trace process {pid}, which runs as {owner}: the kernel does not let \
                     uid {uid} debug it ({e}). Trace your own processes; to trace another user's as root, with \
                     the trace root's too, run `sudo env -u SUDO_UID -u SUDO_GID jtrace …`",
                    uid = self.uid.as_raw()
                )
            }
        }
    }

    /// "uid U, gid G, groups A B C", for messages.
    pub(crate) fn describe(&self) -> String {
        let groups: Vec<String> = self.groups.iter().map(|g| g.as_raw().to_string()).collect();
        format!(
            "uid {}, gid {}, groups {}",
            self.uid.as_raw(),
            self.gid.as_raw(),
            if groups.is_empty() {
                "none".into()
            } else {
                groups.join(" ")
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_parsing() {
        let s = "Name:\tjava\nUid:\t1000\t1001\t1000\t1001\nGid:\t50\t51\t50\t51\nGroups:\t51 27 100 \n";
        let u = User::from_proc_status(s).unwrap();
        assert_eq!(u.uid.as_raw(), 1001);
        assert_eq!(u.gid.as_raw(), 51);
        assert_eq!(u.groups, [51, 27, 100].map(Gid::from_raw));
        let none = User::from_proc_status("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n").unwrap();
        assert!(none.groups.is_empty());
        assert!(User::from_proc_status("Uid:\t0\t0\t0\t0\n").is_none());
    }
}
