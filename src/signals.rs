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

/// Waits until `duration` has passed, a stop signal arrived or process
/// `pid` exited; returns which, for the closing message.
pub(crate) fn wait_for_stop(pid: u32, duration: Option<Duration>) -> &'static str {
    // A pidfd becomes readable when the process exits (zombie or not).
    // SAFETY: pidfd_open takes a pid and flags, and returns a new fd or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
    let deadline = duration.map(|d| Instant::now() + d);
    let why = loop {
        if STOP_REQUESTED.load(Ordering::SeqCst) {
            break "interrupted";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached";
        }
        if pidfd >= 0 {
            let mut pfd = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd. -1 (EINTR from a stop signal) loops.
            if unsafe { libc::poll(&mut pfd, 1, 50) } > 0 {
                break "process exited";
            }
        } else {
            // SAFETY: signal 0 only checks for existence.
            if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
                break "process exited";
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    if pidfd >= 0 {
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(pidfd) };
    }
    why
}
