//! Tests of src/trace_dir.rs: what jtrace makes in a trace directory is
//! its user's from the start, is never made over what is there, and
//! nothing of jtrace's own work is left in it.

use super::*;
use std::os::unix::fs::MetadataExt;

/// A fresh directory for one test, and the trace directory's path in it.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let base = std::env::temp_dir().join(format!("jtrace-unit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let out = base.join("t.jtrace");
    (base, out)
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Files are the creator's (0600) as they appear, made new only: a link
/// or a file under the name is refused and left as it is. meta.json too,
/// rewritten in place; the room kept for it has no name.
#[test]
fn files_are_the_creators_new_and_nameless_room() {
    let me = User::current().unwrap();
    let (base, out) = scratch("made");
    let dir = TraceDir::prepare(&out, &me).unwrap();
    let target = base.join("target");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, out.join("planted")).unwrap();
    assert!(dir.create_file("planted").is_err());
    dir.write_file("x", b"one").unwrap();
    assert!(dir.write_file("x", b"two").is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    assert_eq!(std::fs::read_to_string(out.join("x")).unwrap(), "one");
    dir.keep_room();
    let meta = Meta {
        format: "jtrace".into(),
        command: vec!["first".into()],
        ..Default::default()
    };
    dir.store_meta(&meta).unwrap();
    dir.store_meta(&Meta {
        command: vec!["second".into()],
        ..meta
    })
    .unwrap();
    assert_eq!(Meta::load(&out).unwrap().command, ["second"]);
    for name in ["x", jtrace_format::META_FILE] {
        let md = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(md.is_file());
        assert_eq!(
            (md.uid(), md.gid(), md.mode() & 0o7777),
            (me.uid.as_raw(), me.gid.as_raw(), 0o600)
        );
    }
    assert_eq!(names(&out), [LOCK_FILE, "meta.json", "planted", "x"]);
    dir.release_room();
    drop(dir);
    std::fs::remove_dir_all(&base).unwrap();
}

/// An output holding only what an earlier, killed jtrace left of its own
/// (its room file, a temporary meta.json) is taken over, emptied.
#[test]
fn leftovers_of_a_killed_jtrace_do_not_block_a_run() {
    let me = User::current().unwrap();
    let (base, out) = scratch("left");
    std::fs::create_dir(&out).unwrap();
    for name in [OLD_ROOM_FILE, META_TMP] {
        std::fs::write(out.join(name), "left").unwrap();
    }
    let dir = TraceDir::prepare(&out, &me).unwrap();
    assert_eq!(names(&out), [LOCK_FILE]);
    drop(dir);
    // Anything else still makes it not a trace.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let e = TraceDir::prepare(&out, &me).unwrap_err();
    assert!(e.to_string().contains("is not a jtrace trace"), "{e:#}");
    std::fs::remove_dir_all(&base).unwrap();
}
