//! Field numbers and enum values of the part of Perfetto's trace schema the
//! export writes (protos/perfetto/: trace/trace.proto, trace_packet.proto,
//! trace_packet_defaults.proto, clock_snapshot.proto,
//! common/builtin_clock.proto, track_event/{track_event,track_descriptor,
//! process_descriptor,thread_descriptor,debug_annotation}.proto,
//! interned_data/interned_data.proto, ftrace/{ftrace_event_bundle,
//! ftrace_event,sched}.proto, ps/process_tree.proto; Apache-2.0, The
//! Android Open Source Project). The tests decode the output with the
//! official schema (PyPI `perfetto`'s `perfetto_trace_pb2`).

/// `Trace.packet`.
pub const TRACE_PACKET: u32 = 1;

/// `TracePacket` fields.
pub mod packet {
    /// `FtraceEventBundle ftrace_events`.
    pub const FTRACE_EVENTS: u32 = 1;
    /// `ProcessTree process_tree`.
    pub const PROCESS_TREE: u32 = 2;
    /// `ClockSnapshot clock_snapshot`.
    pub const CLOCK_SNAPSHOT: u32 = 6;
    /// `uint64 timestamp`.
    pub const TIMESTAMP: u32 = 8;
    /// `uint32 trusted_packet_sequence_id`.
    pub const SEQUENCE_ID: u32 = 10;
    /// `TrackEvent track_event`.
    pub const TRACK_EVENT: u32 = 11;
    /// `InternedData interned_data`.
    pub const INTERNED_DATA: u32 = 12;
    /// `uint32 sequence_flags`.
    pub const SEQUENCE_FLAGS: u32 = 13;
    /// `uint32 timestamp_clock_id`.
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `TracePacketDefaults trace_packet_defaults`.
    pub const DEFAULTS: u32 = 59;
    /// `TrackDescriptor track_descriptor`.
    pub const TRACK_DESCRIPTOR: u32 = 60;
    /// `SEQ_INCREMENTAL_STATE_CLEARED`: interned data and defaults start anew.
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
}

/// `TracePacketDefaults` and `TrackEventDefaults` fields.
pub mod defaults {
    /// `TracePacketDefaults.timestamp_clock_id`.
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `TracePacketDefaults.track_event_defaults`.
    pub const TRACK_EVENT_DEFAULTS: u32 = 11;
    /// `TrackEventDefaults.track_uuid`.
    pub const TRACK_UUID: u32 = 11;
}

/// `ClockSnapshot` and `ClockSnapshot.Clock` fields, and clock ids.
pub mod clock {
    /// `ClockSnapshot.clocks`.
    pub const CLOCKS: u32 = 1;
    /// `Clock.clock_id`.
    pub const CLOCK_ID: u32 = 1;
    /// `Clock.timestamp`.
    pub const TIMESTAMP: u32 = 2;
    /// `Clock.is_incremental`.
    pub const IS_INCREMENTAL: u32 = 3;
    /// `BUILTIN_CLOCK_BOOTTIME`: the trace's clock (jtrace's timestamps are
    /// CLOCK_MONOTONIC, written as they are, as the JSON export does).
    pub const BOOTTIME: u64 = 6;
    /// The first sequence-scoped clock id (64..127): each packet sequence's
    /// incremental clock.
    pub const SEQUENCE_INCREMENTAL: u64 = 64;
}

/// `TrackEvent` fields and `TrackEvent.Type` values.
pub mod event {
    /// `repeated DebugAnnotation debug_annotations`.
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    /// `Type type`.
    pub const TYPE: u32 = 9;
    /// `uint64 name_iid`.
    pub const NAME_IID: u32 = 10;
    /// `uint64 track_uuid`.
    pub const TRACK_UUID: u32 = 11;
    /// `repeated fixed64 flow_ids`.
    pub const FLOW_IDS: u32 = 47;
    /// `repeated fixed64 terminating_flow_ids`.
    pub const TERMINATING_FLOW_IDS: u32 = 48;
    /// `TYPE_SLICE_BEGIN`.
    pub const SLICE_BEGIN: u64 = 1;
    /// `TYPE_SLICE_END`.
    pub const SLICE_END: u64 = 2;
    /// `TYPE_INSTANT`.
    pub const INSTANT: u64 = 3;
}

/// `DebugAnnotation` fields.
pub mod annotation {
    /// `uint64 name_iid`.
    pub const NAME_IID: u32 = 1;
    /// `bool bool_value`.
    pub const BOOL_VALUE: u32 = 2;
    /// `uint64 uint_value`.
    pub const UINT_VALUE: u32 = 3;
    /// `uint64 string_value_iid`.
    pub const STRING_VALUE_IID: u32 = 17;
}

/// `InternedData` fields; `EventName`, `DebugAnnotationName` and
/// `InternedString` all have `iid` = 1 and their string = 2.
pub mod interned {
    /// `repeated EventName event_names`.
    pub const EVENT_NAMES: u32 = 2;
    /// `repeated DebugAnnotationName debug_annotation_names`.
    pub const ANNOTATION_NAMES: u32 = 3;
    /// `repeated InternedString debug_annotation_string_values`.
    pub const ANNOTATION_STRINGS: u32 = 29;
    /// `iid` of an interned entry.
    pub const IID: u32 = 1;
    /// `name` / `str` of an interned entry.
    pub const VALUE: u32 = 2;
}

/// `TrackDescriptor`, `ProcessDescriptor`, `ThreadDescriptor` fields.
pub mod track {
    /// `TrackDescriptor.uuid`.
    pub const UUID: u32 = 1;
    /// `TrackDescriptor.name`.
    pub const NAME: u32 = 2;
    /// `TrackDescriptor.process`.
    pub const PROCESS: u32 = 3;
    /// `TrackDescriptor.thread`.
    pub const THREAD: u32 = 4;
    /// `TrackDescriptor.parent_uuid`.
    pub const PARENT_UUID: u32 = 5;
    /// `ProcessDescriptor.pid` and `ThreadDescriptor.pid`.
    pub const PID: u32 = 1;
    /// `ThreadDescriptor.tid`.
    pub const TID: u32 = 2;
    /// `ThreadDescriptor.thread_name`.
    pub const THREAD_NAME: u32 = 5;
    /// `ProcessDescriptor.process_name`.
    pub const PROCESS_NAME: u32 = 6;
}

/// `ProcessTree` with its `Process` and `Thread` fields.
pub mod tree {
    /// `ProcessTree.processes`.
    pub const PROCESSES: u32 = 1;
    /// `ProcessTree.threads`.
    pub const THREADS: u32 = 2;
    /// `Process.pid`, `Thread.tid`.
    pub const ID: u32 = 1;
    /// `Process.ppid`.
    pub const PPID: u32 = 2;
    /// `Process.cmdline`.
    pub const CMDLINE: u32 = 3;
    /// `Thread.name`.
    pub const THREAD_NAME: u32 = 2;
    /// `Thread.tgid`.
    pub const TGID: u32 = 3;
}

/// `FtraceEventBundle`, `FtraceEventBundle.CompactSched`, `FtraceEvent`,
/// `SchedSwitchFtraceEvent` and `SchedWakingFtraceEvent` fields.
pub mod ftrace {
    /// `FtraceEventBundle.cpu`.
    pub const CPU: u32 = 1;
    /// `FtraceEventBundle.event`.
    pub const EVENT: u32 = 2;
    /// `FtraceEventBundle.compact_sched`.
    pub const COMPACT_SCHED: u32 = 4;
    /// `CompactSched.switch_timestamp` (packed, delta-encoded).
    pub const SWITCH_TIMESTAMP: u32 = 1;
    /// `CompactSched.switch_prev_state` (packed).
    pub const SWITCH_PREV_STATE: u32 = 2;
    /// `CompactSched.switch_next_pid` (packed).
    pub const SWITCH_NEXT_PID: u32 = 3;
    /// `CompactSched.switch_next_prio` (packed).
    pub const SWITCH_NEXT_PRIO: u32 = 4;
    /// `CompactSched.intern_table`.
    pub const INTERN_TABLE: u32 = 5;
    /// `CompactSched.switch_next_comm_index` (packed).
    pub const SWITCH_NEXT_COMM_INDEX: u32 = 6;
    /// `FtraceEvent.timestamp`.
    pub const TIMESTAMP: u32 = 1;
    /// `FtraceEvent.pid` (the thread running; for a waking, the waker).
    pub const PID: u32 = 2;
    /// `FtraceEvent.sched_switch`.
    pub const SCHED_SWITCH: u32 = 4;
    /// `FtraceEvent.sched_waking`.
    pub const SCHED_WAKING: u32 = 20;
    /// `SchedSwitchFtraceEvent.prev_comm`.
    pub const PREV_COMM: u32 = 1;
    /// `SchedSwitchFtraceEvent.prev_pid`.
    pub const PREV_PID: u32 = 2;
    /// `SchedSwitchFtraceEvent.prev_state`.
    pub const PREV_STATE: u32 = 4;
    /// `SchedSwitchFtraceEvent.next_comm`.
    pub const NEXT_COMM: u32 = 5;
    /// `SchedSwitchFtraceEvent.next_pid`.
    pub const NEXT_PID: u32 = 6;
    /// `SchedWakingFtraceEvent.comm`.
    pub const WAKING_COMM: u32 = 1;
    /// `SchedWakingFtraceEvent.pid`.
    pub const WAKING_PID: u32 = 2;
    /// `SchedWakingFtraceEvent.success`.
    pub const WAKING_SUCCESS: u32 = 4;
    /// `SchedWakingFtraceEvent.target_cpu`.
    pub const WAKING_TARGET_CPU: u32 = 5;
}
