//! Generates Rust bindings for the JVMTI/JNI headers of the installed JDK.
//!
//! The include directory is `$JAVA_HOME/include` when JAVA_HOME is set, else
//! that of `/usr/lib/jvm/default-java`, else the one next to the `javac` found
//! on PATH (symlinks resolved). Only the JVMTI 1.2 subset the agent uses is
//! bound; its layout is the same in every JDK from 9 on, so bindings made from
//! one JDK's headers work with the others (11, 17, 21 and 25 are tested).

use std::env;
use std::path::{Path, PathBuf};

fn has_headers(include: &Path) -> bool {
    include.join("jvmti.h").is_file() && include.join("jni.h").is_file()
}

fn find_include_dir() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(home) = env::var_os("JAVA_HOME").filter(|h| !h.is_empty()) {
        let inc = PathBuf::from(home).join("include");
        if has_headers(&inc) {
            return Ok(inc);
        }
        // An explicit JAVA_HOME that lacks the headers is a user error: say so
        // rather than silently picking another JDK.
        return Err(format!(
            "JAVA_HOME is set but {} has no jvmti.h/jni.h (is it a JRE rather than a JDK?)",
            inc.display()
        ));
    }
    if let Ok(home) = std::fs::canonicalize("/usr/lib/jvm/default-java") {
        let inc = home.join("include");
        if has_headers(&inc) {
            return Ok(inc);
        }
        tried.push(inc);
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let javac = dir.join("javac");
            if let Ok(real) = std::fs::canonicalize(&javac) {
                if let Some(home) = real.parent().and_then(Path::parent) {
                    let inc = home.join("include");
                    if has_headers(&inc) {
                        return Ok(inc);
                    }
                    tried.push(inc);
                }
            }
        }
    }
    Err(format!(
        "no JDK headers found (tried JAVA_HOME, /usr/lib/jvm/default-java, javac on PATH: {tried:?}); \
         install a JDK or set JAVA_HOME"
    ))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    println!("cargo:rerun-if-env-changed=PATH");

    let include = match find_include_dir() {
        Ok(i) => i,
        Err(e) => panic!("jtrace-agent build: {e}"),
    };
    let linux = include.join("linux");
    if !linux.join("jni_md.h").is_file() {
        panic!("jtrace-agent build: {} has no jni_md.h", linux.display());
    }
    println!("cargo:rerun-if-changed={}", include.join("jvmti.h").display());
    println!("cargo:rerun-if-changed={}", include.join("jni.h").display());

    let bindings = bindgen::Builder::default()
        .header(include.join("jvmti.h").to_string_lossy())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(format!("-I{}", linux.display()))
        .allowlist_type("jvmtiEnv")
        .allowlist_type("jvmtiInterface_1_")
        .allowlist_type("jvmtiEventCallbacks")
        .allowlist_type("jvmtiCapabilities")
        .allowlist_type("jvmtiThreadInfo")
        .allowlist_type("jvmtiThreadGroupInfo")
        .allowlist_type("jvmtiError")
        .allowlist_type("jvmtiEvent")
        .allowlist_type("jvmtiEventMode")
        .allowlist_type("JavaVM")
        .allowlist_type("JNIEnv")
        .allowlist_type("JNIInvokeInterface_")
        .allowlist_type("JNINativeInterface_")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| panic!("jtrace-agent build: bindgen failed on {}: {e}", include.display()));

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("jvmti.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("jtrace-agent build: writing {}: {e}", out.display()));

    compile_probe(&include);
}

/// Compiles the bytecode-rewriting probe class (java/jtrace/Probe.java) with
/// the same JDK's javac, for Java 8, into `$OUT_DIR/jtrace/Probe.class`.
fn compile_probe(include: &Path) {
    let src = Path::new("java/jtrace/Probe.java");
    println!("cargo:rerun-if-changed={}", src.display());
    // Compile-time stand-ins for JDK-internal annotations the probe uses.
    println!("cargo:rerun-if-changed=java/jdk");
    let javac = include.parent().map(|h| h.join("bin/javac")).filter(|j| j.is_file());
    let javac = javac.unwrap_or_else(|| PathBuf::from("javac"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let st = std::process::Command::new(&javac)
        .args(["--release", "8", "-Xlint:-options", "-nowarn", "-d"])
        .arg(&out)
        .args(["-sourcepath", "java"])
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("jtrace-agent build: running {}: {e}", javac.display()));
    if !st.success() {
        panic!("jtrace-agent build: {} failed on {}", javac.display(), src.display());
    }
}
