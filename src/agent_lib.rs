//! The JVM agent's library: where it is, and whether the JVM's user can
//! read it.

use crate::user::User;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// Finds libjtrace_agent.so: $JTRACE_AGENT, else next to the jtrace binary.
pub(crate) fn agent_path() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("JTRACE_AGENT") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("JTRACE_AGENT={} is not a file", p.display());
        }
        return Ok(p.canonicalize()?);
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("jtrace binary has no directory")?;
    for cand in [dir.join("libjtrace_agent.so"), dir.join("../libjtrace_agent.so")] {
        if cand.is_file() {
            return Ok(cand.canonicalize()?);
        }
    }
    bail!(
        "cannot find the JVM agent libjtrace_agent.so next to {} (build it with `cargo build --workspace`, or set JTRACE_AGENT)",
        exe.display()
    )
}

/// The JVM runs as `user` and must be able to read the agent (checked
/// with that user's credentials, so groups and ACLs count).
pub(crate) fn check_readable_by(path: &Path, user: &User) -> anyhow::Result<()> {
    user.run_as(|| {
        rustix::fs::accessat(
            rustix::fs::CWD,
            path,
            rustix::fs::Access::READ_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .with_context(|| {
            format!(
                "the traced command runs as uid {} and cannot read the agent {}; \
                 install jtrace where other users can read it, or set JTRACE_AGENT",
                user.uid.as_raw(),
                path.display()
            )
        })
    })
}
