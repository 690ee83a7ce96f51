//! The bytecode probes as the agent sees them (the probes themselves are
//! agent/java/jtrace/Probe.java): [`layout`], the numbers the probe class
//! shares with the agent (build.rs writes them out as `jtrace.Layout`);
//! [`class`], `jtrace.Probe` through JNI; [`natives`], the natives the
//! probes call and defining the class with them; [`drain`], draining the
//! probes' buffers into the stream; [`batch`], their events encoded as
//! METHOD_BATCH records.

pub(crate) mod batch;
pub(crate) mod class;
pub(crate) mod drain;
pub(crate) mod layout;
pub(crate) mod natives;
