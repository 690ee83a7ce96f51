//! Whose rights the files users name are opened with, and the one way
//! jtrace takes a user's identity to open them.
//!
//! A trace names binaries by path (MAPPING records), and a trace belongs to
//! the user who was traced, who can write it. Root reading such a trace
//! (`sudo jtrace report`) must not open a file that user names with root's
//! rights (docs/ARCHITECTURE.md invariant 6): the paths are opened with the
//! rights of the user who invoked jtrace through sudo, or else of the
//! trace directory's owner, on a thread of its own that takes that
//! identity ([`Credentials::run_as`], which the recording commands use
//! too), so the user's trace can only make jtrace read what the user could
//! read anyway.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context};
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

use crate::bounded_read::{open_regular, open_regular_as_root, refusal};

/// A user's credentials: user, primary group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// The user who invoked jtrace through sudo, when this process runs as
    /// root: SUDO_UID and SUDO_GID, with the groups of that account as a
    /// login gives them. `None`: not root (SUDO_UID left in the
    /// environment names someone jtrace cannot act as), or no SUDO_UID
    /// and SUDO_GID. An id that is no number is an error.
    pub fn sudo_user() -> anyhow::Result<Option<Credentials>> {
        if !rustix::process::geteuid().is_root() {
            return Ok(None);
        }
        let parse = |k: &str| -> anyhow::Result<Option<u32>> {
            match std::env::var(k) {
                // -1 would mean "unchanged" to setresuid/setresgid.
                Ok(v) => match v.parse::<u32>() {
                    Ok(id) if id != u32::MAX => Ok(Some(id)),
                    _ => bail!("{k}={v} is not a user or group id"),
                },
                Err(_) => Ok(None),
            }
        };
        match (parse("SUDO_UID")?, parse("SUDO_GID")?) {
            (Some(uid), Some(gid)) => Ok(Some(Credentials::of_account(uid, gid)?)),
            _ => Ok(None),
        }
    }

    /// The user `uid` with primary group `gid` and the groups of that
    /// account as `initgroups` sets them at login (just `gid` for a uid
    /// without an account).
    pub fn of_account(uid: u32, gid: u32) -> anyhow::Result<Credentials> {
        let account = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .with_context(|| format!("cannot look up the account of uid {uid}"))?;
        let Some(account) = account else {
            return Ok(Credentials {
                uid,
                gid,
                groups: vec![gid],
            });
        };
        let name = std::ffi::CString::new(account.name.as_bytes())
            .with_context(|| format!("account name {:?} contains a NUL byte", account.name))?;
        let groups = nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid))
            .with_context(|| format!("cannot list the groups of {}", account.name))?;
        if groups.is_empty() {
            bail!("the account {} has no groups", account.name);
        }
        Ok(Credentials {
            uid,
            gid,
            groups: groups.into_iter().map(|g| g.as_raw()).collect(),
        })
    }

    /// No one's: the overflow user and group (65534), no groups.
    fn nobody() -> Credentials {
        Credentials {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }
    }

    /// Runs `f` on a thread of its own whose effective user, group and
    /// groups are these: files it opens or creates are checked against and
    /// owned by this user. Only that thread changes identity (raw
    /// syscalls, not glibc's process-wide wrappers), and it ends with `f`.
    /// Needs root.
    pub fn run_as<T: Send>(&self, f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let who = || format!("uid {}, gid {}", self.uid, self.gid);
                let groups: Vec<Gid> = self.groups.iter().map(|&g| Gid::from_raw(g)).collect();
                set_thread_groups(&groups).with_context(|| format!("cannot take the groups of {}", who()))?;
                set_thread_res_gid(None, Gid::from_raw(self.gid), None)
                    .with_context(|| format!("cannot take the group of {}", who()))?;
                set_thread_res_uid(None, Uid::from_raw(self.uid), None)
                    .with_context(|| format!("cannot take the identity of {}", who()))?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread acting as uid {} panicked", self.uid)))
        })
    }
}

/// The rights binaries are opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinaryAccess {
    /// This process's own (as root: following a link at the path only if
    /// root put it there).
    Own,
    /// Another user's.
    As(Credentials),
}

impl BinaryAccess {
    /// For the trace in `dir`, when this process runs as root: the rights
    /// of the user who invoked it through sudo ([`Credentials::sudo_user`],
    /// not root), else those of `dir`'s owner if not root; otherwise this
    /// process's own. What cannot be told (a malformed SUDO_UID, a
    /// directory that cannot be inspected) gets nobody's rights (65534).
    pub fn for_trace(dir: &Path) -> BinaryAccess {
        // A trace built in memory (no directory) is its builder's own.
        if !rustix::process::geteuid().is_root() || dir.as_os_str().is_empty() {
            return BinaryAccess::Own;
        }
        match Credentials::sudo_user() {
            Ok(Some(c)) if c.uid != 0 => return BinaryAccess::As(c),
            Ok(_) => {}
            Err(_) => return BinaryAccess::As(Credentials::nobody()),
        }
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.uid() == 0 => BinaryAccess::Own,
            Ok(m) => BinaryAccess::As(Credentials::of_account(m.uid(), m.gid()).unwrap_or(Credentials {
                uid: m.uid(),
                gid: m.gid(),
                groups: vec![m.gid()],
            })),
            Err(_) => BinaryAccess::As(Credentials::nobody()),
        }
    }

    /// Opens `path` for reading with these rights: a regular file only,
    /// opened without blocking (a FIFO or a device is refused, never
    /// waited on). Root's own open follows a link at the path only if root
    /// put it there ([`open_regular_as_root`]); another user's follows
    /// links as that user would. Another user's open that fails says the
    /// same whatever the reason (no such file, not permitted, a link it
    /// may not follow, an identity jtrace could not take): no answer tells
    /// whether a file it may not open is there.
    pub fn open(&self, path: &Path) -> io::Result<File> {
        let BinaryAccess::As(c) = self else {
            return match rustix::process::geteuid().is_root() {
                true => open_regular_as_root(path),
                false => open_regular(path),
            };
        };
        let opened = c.run_as(|| Ok(open_regular(path)));
        match opened {
            Ok(Ok(file)) => Ok(file),
            // Opened, but refused: the user's own open would tell as much.
            Ok(Err(e)) if refusal(&e).is_some() => Err(e),
            _ => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("not found, or not readable as uid {}", c.uid),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_has_its_login_groups() {
        let root = Credentials::of_account(0, 0).unwrap();
        assert!(root.groups.contains(&0));
        // A uid without an account has its group only.
        let none = Credentials::of_account(4_000_000_000, 77).unwrap();
        assert_eq!(none.groups, [77]);
    }
}
