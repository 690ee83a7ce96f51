//! The names of the threads the JVM agent starts in the traced JVM: the
//! agent names its threads by these, and readers tell the tracer's own
//! threads from the program's by them (the report leaves them out of its
//! default text).

/// The stream file's grower (`agent/src/stream/file.rs`).
pub const GROW: &str = "jtrace-grow";
/// The demoter, a daemon Java thread (`agent/src/demotion/demoter.rs`).
pub const DEMOTER: &str = "jtrace demoter";
/// The ring recording's chunk rotation (`agent/src/load.rs`).
pub const CHUNKS: &str = "jtrace-chunks";

/// Every thread name the agent gives.
pub const AGENT_THREADS: [&str; 3] = [GROW, DEMOTER, CHUNKS];

/// Whether `name` (a Java name or a kernel comm) is one the agent gives
/// its threads.
pub fn is_agent_thread(name: &str) -> bool {
    AGENT_THREADS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel keeps 15 bytes of a thread's name: a longer one would
    /// reach the reader cut, and match nothing.
    #[test]
    fn names_fit_in_a_comm() {
        for n in AGENT_THREADS {
            assert!(n.len() <= 15, "{n}");
            assert!(is_agent_thread(n));
        }
        assert!(!is_agent_thread("jtrace"));
    }
}
