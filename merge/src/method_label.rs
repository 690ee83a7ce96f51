//! Method names as the text views print them: `class.name`, and where a
//! class has several methods of that name (overloads), their parameter
//! types as Java writes them, `MVPrimaryIndex.lockRow(SessionLocal, Row)`,
//! so that two rows are never two identical names.

use std::collections::{HashMap, HashSet};

/// Which `class.name`s stand for more than one method.
#[derive(Debug, Default)]
pub struct MethodLabels {
    /// Class to its overloaded method names.
    overloaded: HashMap<String, HashSet<String>>,
}

impl MethodLabels {
    /// Learns the overloads among `methods` (class, name, JVM signature):
    /// a name is overloaded when it comes with two different signatures.
    pub fn new<'a>(methods: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> MethodLabels {
        let mut first: HashMap<(&str, &str), &str> = HashMap::new();
        let mut overloaded: HashMap<String, HashSet<String>> = HashMap::new();
        for (class, name, signature) in methods {
            let seen = *first.entry((class, name)).or_insert(signature);
            if seen != signature {
                overloaded
                    .entry(class.to_string())
                    .or_default()
                    .insert(name.to_string());
            }
        }
        MethodLabels { overloaded }
    }

    /// `class.name`, with the parameter types when the name is overloaded.
    pub fn label(&self, class: &str, name: &str, signature: &str) -> String {
        let overloaded = self.overloaded.get(class).is_some_and(|names| names.contains(name));
        match parameter_types(signature).filter(|_| overloaded) {
            Some(params) => format!("{class}.{name}{params}"),
            None => format!("{class}.{name}"),
        }
    }
}

/// A JVM method descriptor's parameters as Java writes them, with simple
/// class names: `(Lorg/h2/engine/SessionLocal;[IJ)V` is
/// `(SessionLocal, int[], long)`. `None` if `signature` is not a
/// descriptor (a native library call has none).
pub fn parameter_types(signature: &str) -> Option<String> {
    let params = signature.strip_prefix('(')?.split_once(')')?.0;
    let mut out = Vec::new();
    let mut rest = params;
    while !rest.is_empty() {
        let dims = rest.len() - rest.trim_start_matches('[').len();
        rest = &rest[dims..];
        let (ty, after) = match rest.as_bytes().first()? {
            b'L' => {
                let (class, after) = rest[1..].split_once(';')?;
                (class.rsplit('/').next()?.to_string(), after)
            }
            &b => (primitive(b)?.to_string(), &rest[1..]),
        };
        out.push(format!("{ty}{}", "[]".repeat(dims)));
        rest = after;
    }
    Some(format!("({})", out.join(", ")))
}

fn primitive(b: u8) -> Option<&'static str> {
    Some(match b {
        b'Z' => "boolean",
        b'B' => "byte",
        b'C' => "char",
        b'S' => "short",
        b'I' => "int",
        b'J' => "long",
        b'F' => "float",
        b'D' => "double",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_read_as_java_parameter_lists() {
        assert_eq!(parameter_types("()V").as_deref(), Some("()"));
        assert_eq!(
            parameter_types("(Lorg/h2/engine/SessionLocal;Lorg/h2/result/Row;)V").as_deref(),
            Some("(SessionLocal, Row)")
        );
        assert_eq!(
            parameter_types("([IJ[[Ljava/lang/String;Z)I").as_deref(),
            Some("(int[], long, String[][], boolean)")
        );
        assert_eq!(parameter_types(""), None);
        assert_eq!(parameter_types("(Q)V"), None);
        assert_eq!(parameter_types("(Ljava/lang/String)V"), None);
    }

    #[test]
    fn only_overloaded_names_carry_their_parameters() {
        let labels = MethodLabels::new([
            ("a.Index", "lockRow", "(La/Session;La/Row;)V"),
            ("a.Index", "lockRow", "(La/Map;La/Row;I)V"),
            ("a.Index", "size", "()J"),
            ("a.Other", "lockRow", "(La/Row;)V"),
        ]);
        assert_eq!(
            labels.label("a.Index", "lockRow", "(La/Session;La/Row;)V"),
            "a.Index.lockRow(Session, Row)"
        );
        assert_eq!(
            labels.label("a.Index", "lockRow", "(La/Map;La/Row;I)V"),
            "a.Index.lockRow(Map, Row, int)"
        );
        assert_eq!(labels.label("a.Index", "size", "()J"), "a.Index.size");
        assert_eq!(labels.label("a.Other", "lockRow", "(La/Row;)V"), "a.Other.lockRow");
        // A native library call has no descriptor: its name alone.
        assert_eq!(
            MethodLabels::new([("libz.so.1", "inflate", "")]).label("libz.so.1", "inflate", ""),
            "libz.so.1.inflate"
        );
    }
}
