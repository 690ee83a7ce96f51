//! Class-file reading and writing primitives: a big-endian reader, the
//! constant pool (parsed, and appended to), and the parse error.

use std::collections::HashMap;

/// A class-file parsing error (the class is then left untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of a class-file operation.
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// An [`Error`] result.
pub(crate) fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

/// Big-endian reader over a byte slice.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return err("truncated class file");
        };
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn u1(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }
    pub(crate) fn u2(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u4(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.data.len()
    }
}

/// Appends `v` big-endian.
pub(crate) fn put_u2(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends `v` big-endian.
pub(crate) fn put_u4(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

// Constant-pool tags (JVMS §4.4).
const CONSTANT_UTF8: u8 = 1;
const CONSTANT_INTEGER: u8 = 3;
const CONSTANT_FLOAT: u8 = 4;
const CONSTANT_LONG: u8 = 5;
const CONSTANT_DOUBLE: u8 = 6;
const CONSTANT_CLASS: u8 = 7;
const CONSTANT_STRING: u8 = 8;
const CONSTANT_FIELDREF: u8 = 9;
const CONSTANT_METHODREF: u8 = 10;
const CONSTANT_INTERFACE_METHODREF: u8 = 11;
const CONSTANT_NAME_AND_TYPE: u8 = 12;
const CONSTANT_METHOD_HANDLE: u8 = 15;
const CONSTANT_METHOD_TYPE: u8 = 16;
const CONSTANT_DYNAMIC: u8 = 17;
const CONSTANT_INVOKE_DYNAMIC: u8 = 18;
const CONSTANT_MODULE: u8 = 19;
const CONSTANT_PACKAGE: u8 = 20;

/// The constant-pool entries the rewriter needs to read.
#[derive(Debug, Clone)]
enum Cp {
    /// Unused slot (index 0, second half of long/double) or a kind not needed.
    Other,
    Utf8(String),
    /// Class: name index.
    Class(u16),
    /// Methodref / InterfaceMethodref: class index, name_and_type index.
    MemberRef(u16, u16),
    /// NameAndType: name index.
    NameAndType(u16),
}

/// Parsed constant pool plus appended entries.
pub(crate) struct ConstPool {
    entries: Vec<Cp>,
    /// Encoded entries appended by the rewriter.
    added: Vec<u8>,
    /// Index the next appended entry gets.
    next: u32,
    utf8_index: HashMap<String, u16>,
    int_index: HashMap<u32, u16>,
    /// Class entries appended, by name (the frames' types ask again and again).
    class_index: HashMap<String, u16>,
}

impl ConstPool {
    pub(crate) fn parse(r: &mut Reader) -> Result<ConstPool> {
        let count = r.u2()? as usize;
        let mut entries = vec![Cp::Other; count.max(1)];
        let mut utf8_index = HashMap::new();
        let mut i = 1;
        while i < count {
            let tag = r.u1()?;
            let mut slots = 1;
            entries[i] = match tag {
                CONSTANT_UTF8 => {
                    let n = r.u2()? as usize;
                    let s = String::from_utf8_lossy(r.bytes(n)?).into_owned();
                    utf8_index.entry(s.clone()).or_insert(i as u16);
                    Cp::Utf8(s)
                }
                CONSTANT_INTEGER | CONSTANT_FLOAT => {
                    r.bytes(4)?;
                    Cp::Other
                }
                CONSTANT_LONG | CONSTANT_DOUBLE => {
                    r.bytes(8)?;
                    slots = 2;
                    Cp::Other
                }
                CONSTANT_CLASS => Cp::Class(r.u2()?),
                CONSTANT_STRING | CONSTANT_METHOD_TYPE | CONSTANT_MODULE | CONSTANT_PACKAGE => {
                    r.bytes(2)?;
                    Cp::Other
                }
                CONSTANT_FIELDREF => {
                    r.bytes(4)?;
                    Cp::Other
                }
                CONSTANT_METHODREF | CONSTANT_INTERFACE_METHODREF => Cp::MemberRef(r.u2()?, r.u2()?),
                CONSTANT_NAME_AND_TYPE => {
                    let name = r.u2()?;
                    r.u2()?;
                    Cp::NameAndType(name)
                }
                CONSTANT_METHOD_HANDLE => {
                    r.bytes(3)?;
                    Cp::Other
                }
                CONSTANT_DYNAMIC | CONSTANT_INVOKE_DYNAMIC => {
                    r.bytes(4)?;
                    Cp::Other
                }
                t => return err(format!("unknown constant pool tag {t} at entry {i}")),
            };
            i += slots;
        }
        Ok(ConstPool {
            entries,
            added: Vec::new(),
            next: count as u32,
            utf8_index,
            class_index: HashMap::new(),
            int_index: HashMap::new(),
        })
    }

    /// The pool's entry count with the appended entries (the rewritten
    /// class's constant_pool_count).
    pub(crate) fn count(&self) -> u16 {
        self.next as u16
    }

    /// The encoded entries appended to the pool.
    pub(crate) fn appended(&self) -> &[u8] {
        &self.added
    }

    /// The text of Utf8 entry `idx`.
    pub(crate) fn utf8(&self, idx: u16) -> Option<&str> {
        match self.entries.get(idx as usize) {
            Some(Cp::Utf8(s)) => Some(s),
            _ => None,
        }
    }

    /// Internal name of Class entry `idx`.
    pub(crate) fn class_name(&self, idx: u16) -> Option<&str> {
        match self.entries.get(idx as usize) {
            Some(Cp::Class(name)) => self.utf8(*name),
            _ => None,
        }
    }

    /// Name of the method a Methodref/InterfaceMethodref refers to.
    pub(crate) fn member_name(&self, idx: u16) -> Option<&str> {
        let Some(Cp::MemberRef(_, nat)) = self.entries.get(idx as usize) else {
            return None;
        };
        let Some(Cp::NameAndType(name)) = self.entries.get(*nat as usize) else {
            return None;
        };
        self.utf8(*name)
    }

    /// Internal name of the class a Methodref/InterfaceMethodref names
    /// (the static type the call resolves from).
    pub(crate) fn member_class(&self, idx: u16) -> Option<&str> {
        let Some(Cp::MemberRef(class, _)) = self.entries.get(idx as usize) else {
            return None;
        };
        self.class_name(*class)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<u16> {
        if self.next >= 0xFFFF {
            return err("constant pool full");
        }
        let idx = self.next as u16;
        self.next += 1;
        self.added.extend_from_slice(bytes);
        Ok(idx)
    }

    /// Index of a Utf8 entry with text `s` (existing or appended).
    pub(crate) fn utf8_entry(&mut self, s: &str) -> Result<u16> {
        if let Some(&i) = self.utf8_index.get(s) {
            return Ok(i);
        }
        let mut b = vec![CONSTANT_UTF8];
        put_u2(&mut b, s.len() as u16);
        b.extend_from_slice(s.as_bytes());
        let i = self.push(&b)?;
        self.utf8_index.insert(s.to_string(), i);
        Ok(i)
    }

    /// Appends a Class entry (once per name).
    pub(crate) fn class_entry(&mut self, name: &str) -> Result<u16> {
        if let Some(&i) = self.class_index.get(name) {
            return Ok(i);
        }
        let n = self.utf8_entry(name)?;
        let mut b = vec![CONSTANT_CLASS];
        put_u2(&mut b, n);
        let i = self.push(&b)?;
        self.class_index.insert(name.to_string(), i);
        Ok(i)
    }

    /// Appends a Methodref entry.
    pub(crate) fn methodref(&mut self, class: u16, name: &str, desc: &str) -> Result<u16> {
        let (n, d) = (self.utf8_entry(name)?, self.utf8_entry(desc)?);
        let mut nat = vec![CONSTANT_NAME_AND_TYPE];
        put_u2(&mut nat, n);
        put_u2(&mut nat, d);
        let nat = self.push(&nat)?;
        let mut b = vec![CONSTANT_METHODREF];
        put_u2(&mut b, class);
        put_u2(&mut b, nat);
        self.push(&b)
    }

    /// Index of an Integer entry holding `v` (appended once).
    pub(crate) fn int_entry(&mut self, v: u32) -> Result<u16> {
        if let Some(&i) = self.int_index.get(&v) {
            return Ok(i);
        }
        let mut b = vec![CONSTANT_INTEGER];
        put_u4(&mut b, v);
        let i = self.push(&b)?;
        self.int_index.insert(v, i);
        Ok(i)
    }
}
