//! Accounting for virtual threads, whose method calls are not traced
//! (jtrace keys everything by kernel thread, and a virtual thread moves
//! between carriers): the probes count them in `jtrace.Probe`
//! (agent/java/jtrace/Probe.java), and the agent reports the counts, so
//! that the loss is never silent.

use std::ffi::CStr;

use jtrace_format::{Payload, Record};

use crate::jvm::{clear_exception, jni};
use crate::probe_class;
use crate::recorder::Recorder;
use crate::state::{now_ns, say, tid};
use crate::sys::*;

/// Records (as an agent message in the stream) that virtual threads called
/// traced methods since the last report, and resets the probes' counts.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv (or null: nothing is done).
pub(crate) unsafe fn report(jni: *mut JNIEnv, rec: &Recorder) {
    let class = probe_class::class();
    if jni.is_null() || class.is_null() {
        return;
    }
    let field = |name: &CStr| {
        let f = jni!(jni, GetStaticFieldID, class, name.as_ptr(), c"J".as_ptr()).unwrap_or(std::ptr::null_mut());
        clear_exception(jni);
        f
    };
    let (threads_field, events_field) = (field(c"virtualThreads"), field(c"virtualEvents"));
    if threads_field.is_null() || events_field.is_null() || jni!(jni, MonitorEnter, class) != Some(0) {
        clear_exception(jni);
        return;
    }
    // The probes update both under the class's lock.
    let threads = jni!(jni, GetStaticLongField, class, threads_field).unwrap_or(0);
    let events = jni!(jni, GetStaticLongField, class, events_field).unwrap_or(0);
    jni!(jni, SetStaticLongField, class, threads_field, 0);
    jni!(jni, SetStaticLongField, class, events_field, 0);
    jni!(jni, MonitorExit, class);
    clear_exception(jni);
    if threads > 0 {
        let msg = format!(
            "method calls on virtual threads are not traced: {threads} virtual thread(s) called traced methods \
             (at least {events} method events not recorded)"
        );
        say(&msg);
        rec.write_direct(&Record {
            tid: tid(),
            ts: now_ns(),
            payload: Payload::AgentError(msg),
        });
    }
}
