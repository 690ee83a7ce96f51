//! The part of Perfetto's trace schema the export writes, as prost messages.
//!
//! Field numbers and types are those of Perfetto's protos
//! (protos/perfetto/trace/: trace.proto, trace_packet.proto,
//! track_event/{track_event,track_descriptor,process_descriptor,
//! thread_descriptor,debug_annotation}.proto, interned_data/interned_data.proto,
//! ftrace/{ftrace_event_bundle,ftrace_event,sched}.proto, ps/process_tree.proto;
//! Apache-2.0, The Android Open Source Project), keeping only the fields
//! written here. A `oneof` of the original is a set of optional fields
//! here: the bytes on the wire are the same. The tests decode the output
//! with the official schema (PyPI `perfetto`'s `perfetto_trace_pb2`).

/// `TracePacket`: one unit of the trace (`Trace.packet`, field 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Scheduler events of one CPU.
    #[prost(message, optional, tag = "1")]
    pub ftrace_events: Option<FtraceEventBundle>,
    /// Processes and threads with their names.
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    /// Nanoseconds (the default clock, BOOTTIME; jtrace's are CLOCK_MONOTONIC).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The writer's sequence (interned data is per sequence).
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// A slice begin or end, an instant.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Strings defined for later packets of the sequence.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `SEQ_INCREMENTAL_STATE_CLEARED` (1), `SEQ_NEEDS_INCREMENTAL_STATE` (2).
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// A track: a process, a thread or a named track under one.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// The track's id, unique in the trace.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Name of a track that is neither a process nor a thread.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Makes it a process track.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// Makes it a thread track.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// The process or thread track it belongs to.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// `ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Shown name.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Thread id.
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    /// Shown name.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Arguments shown with the slice.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `TYPE_SLICE_BEGIN` (1), `TYPE_SLICE_END` (2), `TYPE_INSTANT` (3).
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Interned name ([`InternedData::event_names`]).
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// The track.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// Flows that start (or pass) here.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows that end here.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.Type` values.
pub const SLICE_BEGIN: i32 = 1;
/// See [`SLICE_BEGIN`].
pub const SLICE_END: i32 = 2;
/// See [`SLICE_BEGIN`].
pub const INSTANT: i32 = 3;
/// `TracePacket.SequenceFlags` values.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// See [`SEQ_INCREMENTAL_STATE_CLEARED`].
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `DebugAnnotation`: a named argument of an event.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// Interned name ([`InternedData::debug_annotation_names`]).
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// A boolean value.
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    /// An unsigned value.
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// An interned string value ([`InternedData::debug_annotation_string_values`]).
    #[prost(uint64, optional, tag = "17")]
    pub string_value_iid: Option<u64>,
}

/// `InternedData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Event names.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    /// Debug annotation names.
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<EventName>,
    /// Debug annotation string values.
    #[prost(message, repeated, tag = "29")]
    pub debug_annotation_string_values: Vec<InternedString>,
}

/// `EventName` and `DebugAnnotationName` (the same two fields).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    /// Its id in the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// `InternedString`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// Its id in the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The string's bytes.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// `FtraceEventBundle`: events of one CPU.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FtraceEventBundle {
    /// The CPU.
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    /// Its events.
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
}

/// `FtraceEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FtraceEvent {
    /// Nanoseconds.
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    /// The thread that was running (for a switch, the one leaving).
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    /// `sched/sched_switch`.
    #[prost(message, optional, tag = "4")]
    pub sched_switch: Option<SchedSwitch>,
    /// `sched/sched_waking`.
    #[prost(message, optional, tag = "20")]
    pub sched_waking: Option<SchedWaking>,
}

/// `SchedSwitchFtraceEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SchedSwitch {
    /// Name of the thread leaving.
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    /// The thread leaving.
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    /// Its state (the kernel's `prev_state` bits).
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    /// Name of the thread taking the CPU.
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    /// The thread taking the CPU.
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
}

/// `SchedWakingFtraceEvent` (the waker is the enclosing event's `pid`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SchedWaking {
    /// Name of the thread woken.
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    /// The thread woken.
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    /// 1: it was woken.
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    /// The CPU it will run on.
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// `ProcessTree`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessTree {
    /// Processes.
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<Process>,
    /// Threads.
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<Thread>,
}

/// `ProcessTree.Process`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Process {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Parent process id (0: not known).
    #[prost(int32, optional, tag = "2")]
    pub ppid: Option<i32>,
    /// Command line.
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
}

/// `ProcessTree.Thread`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Thread {
    /// Thread id.
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Process id.
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
}
