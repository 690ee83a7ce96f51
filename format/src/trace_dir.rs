//! The names of the files in a trace directory.

/// Name of the kernel stream inside a trace directory.
pub const KERNEL_FILE: &str = "kernel.bin";
/// Name of the metadata file inside a trace directory.
pub const META_FILE: &str = "meta.json";
/// Prefix of JVM stream file names (`jvm-<pid>.bin`).
pub const JVM_FILE_PREFIX: &str = "jvm-";
/// Name of the agent's configuration file inside a trace directory.
pub const AGENT_CONFIG_FILE: &str = "agent.conf";
