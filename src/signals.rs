//! What jtrace does with SIGINT, SIGTERM and SIGHUP while it records:
//! `run` passes them on to the traced command (and finishes the trace when
//! it exits); `record` and `attach` stop recording cleanly.

use anyhow::Context;
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The traced command's pid, 0 when none runs (read by the handler).
static CHILD_PID: AtomicI32 = AtomicI32::new(0);
/// Set by a stop signal of `record` or `attach`.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn forward_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // A signal from the terminal (si_pid 0, sent by the kernel) already
    // reached the child, which shares our process group; forward only the
    // ones sent to jtrace alone (kill, systemd, a supervisor).
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo.
    let from_kernel = info.is_null() || unsafe { (*info).si_pid() } == 0;
    let child = CHILD_PID.load(Ordering::SeqCst);
    if child > 0 && !from_kernel {
        // SAFETY: kill is async-signal-safe; a failure cannot be handled here.
        unsafe { libc::kill(child, sig) };
    }
}

extern "C" fn request_stop(_sig: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs `handler` for `signals`; every failure is an error.
fn install(signals: &[Signal], handler: SigHandler, flags: SaFlags) -> anyhow::Result<()> {
    let action = SigAction::new(handler, flags, SigSet::empty());
    for &sig in signals {
        // SAFETY: both handlers only touch atomics and call kill(2).
        unsafe { sigaction(sig, &action) }.with_context(|| format!("cannot install a handler for {sig}"))?;
    }
    Ok(())
}

/// Passes SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to jtrace on to the
/// command named by [`set_child`] (`jtrace run`).
pub(crate) fn forward_to_child() -> anyhow::Result<()> {
    install(
        &[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT],
        SigHandler::SigAction(forward_signal),
        SaFlags::SA_SIGINFO | SaFlags::SA_RESTART,
    )
}

/// Names the command signals are forwarded to; None once it has exited.
pub(crate) fn set_child(pid: Option<u32>) {
    CHILD_PID.store(pid.map_or(0, |p| p as i32), Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP request a clean stop ([`wait_for_stop`]).
pub(crate) fn stop_on_signals() -> anyhow::Result<()> {
    install(
        &[Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP],
        SigHandler::Handler(request_stop),
        SaFlags::empty(),
    )
}

/// Whether a stop signal arrived (for waits of their own, as
/// src/cgroup_watch.rs's).
pub(crate) fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::SeqCst)
}

/// Waits until `duration` has passed, a stop signal arrived or every
/// process of `pids` exited; returns which, for the closing message.
pub(crate) fn wait_for_stop(pids: &[u32], duration: Option<Duration>) -> &'static str {
    // A pidfd becomes readable when its process exits (zombie or not); -1
    // where pidfd_open failed (then signal 0 tells).
    let mut left: Vec<(u32, i32)> = (pids.iter())
        // SAFETY: pidfd_open takes a pid and flags, and returns a new fd or -1.
        .map(|&pid| {
            (
                pid,
                unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32,
            )
        })
        .collect();
    let deadline = duration.map(|d| Instant::now() + d);
    let why = loop {
        if STOP_REQUESTED.load(Ordering::SeqCst) {
            break "interrupted";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached";
        }
        let mut pfds: Vec<libc::pollfd> = (left.iter())
            .filter(|(_, fd)| *fd >= 0)
            .map(|&(_, fd)| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        if pfds.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        } else {
            // SAFETY: valid pollfds. -1 (EINTR from a stop signal) loops.
            unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 50) };
        }
        let exited_fds: Vec<i32> = pfds.iter().filter(|p| p.revents != 0).map(|p| p.fd).collect();
        left.retain(|&(pid, fd)| {
            let exited = if fd >= 0 {
                exited_fds.contains(&fd)
            } else {
                // SAFETY: signal 0 only checks for existence.
                unsafe { libc::kill(pid as libc::pid_t, 0) != 0 }
            };
            if exited && fd >= 0 {
                // SAFETY: our own fd, closed once (it leaves `left`).
                unsafe { libc::close(fd) };
            }
            !exited
        });
        if left.is_empty() {
            break if pids.len() == 1 {
                "process exited"
            } else {
                "every process exited"
            };
        }
    };
    for (_, fd) in left {
        if fd >= 0 {
            // SAFETY: our own fd, closed once.
            unsafe { libc::close(fd) };
        }
    }
    why
}
