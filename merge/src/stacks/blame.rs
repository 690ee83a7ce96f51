//! Which frame of a stack is to blame for a block: the application's
//! code that blocked, as the report's per-method stacks and
//! `stack_methods` name it.

use crate::stacks::symbolize::Frame;

/// Of a stack's frames (innermost first), the innermost Java frame outside
/// the JDK (the application's code that blocked), else the innermost Java
/// frame.
pub(crate) fn blamed_frame(frames: &[Frame]) -> Option<&Frame> {
    const JDK: [&str; 4] = ["java.", "jdk.", "sun.", "com.sun."];
    let mut java = frames.iter().filter(|f| f.is_java());
    let first = java.clone().next();
    java.find(|f| !JDK.iter().any(|p| f.name.starts_with(p))).or(first)
}
