//! The names of the files in a trace directory.

/// Name of the kernel stream inside a trace directory.
pub const KERNEL_FILE: &str = "kernel.bin";
/// Name of the metadata file inside a trace directory.
pub const META_FILE: &str = "meta.json";
/// Prefix of JVM stream file names (`jvm-<pid>.bin`).
pub const JVM_FILE_PREFIX: &str = "jvm-";
/// Name of the agent's configuration file inside a trace directory.
pub const AGENT_CONFIG_FILE: &str = "agent.conf";
/// The stream name of the kernel stream's chunks (`kernel.<seq>.bin`).
pub const KERNEL_STREAM: &str = "kernel";

/// The file of chunk `seq` of stream `stream` (`kernel`, or `jvm-<pid>`)
/// in a ring recording: `<stream>.<seq>.bin`, `seq` zero-padded to six
/// digits so that names sort in order.
pub fn chunk_file(stream: &str, seq: u64) -> String {
    format!("{stream}.{seq:06}.bin")
}

/// The stream a stream file name belongs to, and its chunk number if it
/// is a chunk: `kernel.bin` → (`kernel`, None), `jvm-12.000003.bin` →
/// (`jvm-12`, Some(3)); None for a name that is not a stream's.
pub fn parse_stream_file(name: &str) -> Option<(&str, Option<u64>)> {
    let stem = name.strip_suffix(".bin")?;
    let (stream, seq) = match stem.rsplit_once('.') {
        Some((s, n)) if n.len() >= 6 && n.bytes().all(|b| b.is_ascii_digit()) => (s, Some(n.parse().ok()?)),
        Some(_) => return None,
        None => (stem, None),
    };
    let ok = stream == KERNEL_STREAM
        || stream
            .strip_prefix(JVM_FILE_PREFIX)
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some((stream, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_file_names() {
        assert_eq!(parse_stream_file(KERNEL_FILE), Some(("kernel", None)));
        assert_eq!(parse_stream_file("jvm-12.bin"), Some(("jvm-12", None)));
        assert_eq!(parse_stream_file(&chunk_file("jvm-12", 3)), Some(("jvm-12", Some(3))));
        assert_eq!(chunk_file("kernel", 1_234_567), "kernel.1234567.bin");
        assert_eq!(
            parse_stream_file("kernel.1234567.bin"),
            Some(("kernel", Some(1_234_567)))
        );
        for bad in [
            "meta.json",
            "jvm-.bin",
            "jvm-x.bin",
            "kernel.12.bin",
            "other.000001.bin",
            "jvm-1.00000a.bin",
        ] {
            assert_eq!(parse_stream_file(bad), None, "{bad}");
        }
    }
}
