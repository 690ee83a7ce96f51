//! The end-to-end tests of `agent.rs` again, with `bytecode_rewriting off`:
//! method entry/exit then come from JVMTI MethodEntry/MethodExit events.

#[path = "agent.rs"]
mod jvmti_mechanism;
