//! Ring recordings (`--max-size`, `--max-age`): the chunk files' names,
//! and the keeper that deletes the oldest chunks while the recording runs.

use crate::disk::DiskPlan;

/// The name of the first file of stream `stream` (`kernel`, `jvm-<pid>`):
/// its only file, or its first chunk in a ring recording.
pub(crate) fn first_stream_file(stream: &str, disk: &DiskPlan) -> String {
    match disk.ring {
        Some(_) => jtrace_format::chunk_file(stream, 0),
        None => format!("{stream}.bin"),
    }
}
