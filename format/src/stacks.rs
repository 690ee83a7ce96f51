//! The stack records: the stacks the BPF programs capture at
//! switch-outs and CPU samples (STACK, CPU_SAMPLE, the ids a SWITCH_OUT
//! carries), what the recorder stores to symbolize them later (MAPPING,
//! KSYM), and what the agent tells of the JVM's code (CODE_BLOB,
//! COMPILED_INLINE, METHOD_ADDRS). docs/FORMAT.md "Stacks" describes the
//! same bytes.

use crate::c;
use crate::wire::{wire, Cursor, Wire};

/// [`Stack::flags`]: kernel frames (their `method` is 0).
pub const STACK_KERNEL: u32 = c::STACK_KERNEL;
/// [`Stack::flags`]: user frames.
pub const STACK_USER: u32 = c::STACK_USER;
/// [`Stack::flags`]: the walk stopped at its depth limit; outer frames are missing.
pub const STACK_TRUNCATED: u32 = c::STACK_TRUNCATED;
/// [`Stack::flags`]: the Java part of a user stack was walked from the
/// thread's last Java frame (HotSpot's frame anchor), after the native part.
pub const STACK_JAVA_ANCHOR: u32 = c::STACK_JAVA_ANCHOR;

/// The stack ids a SWITCH_OUT carries after its base fields when stacks
/// are recorded (a 40-byte SWITCH_OUT; 0 = no stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchStacks {
    /// Id of the kernel stack (a [`Stack`] with [`STACK_KERNEL`]).
    pub kstack: u32,
    /// Id of the user stack (a [`Stack`] with [`STACK_USER`]).
    pub ustack: u32,
}
wire! { SwitchStacks { kstack, ustack } }

impl SwitchStacks {
    /// Bytes of a SWITCH_OUT payload with stacks.
    pub const PAYLOAD_LEN: usize = std::mem::size_of::<c::switch_out_stacks_rec>() - crate::RECORD_HEADER_LEN;

    /// The stack ids of a SWITCH_OUT payload, `None` for one without them.
    #[inline]
    pub fn of_switch_out(payload: &[u8]) -> Option<SwitchStacks> {
        let base = crate::SwitchOut::LEN;
        let b = payload.get(base..base + 8)?;
        Some(SwitchStacks {
            kstack: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            ustack: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// One frame of a [`Stack`]: a return address (the innermost: the pc) and,
/// for a frame of the JVM's interpreter, the `Method*` read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackFrame {
    /// Code address.
    pub pc: u64,
    /// HotSpot `Method*` of an interpreted frame (see [`MethodAddrs`]), else 0.
    pub method: u64,
}

/// Kernel payload of [`kind::STACK`](crate::kind::STACK): the definition of a stack id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stack {
    /// The id SWITCH_OUT and CPU_SAMPLE records use (unique in the stream).
    pub id: u32,
    /// Process of a user stack (its addresses are that process's); 0 for a kernel stack.
    pub tgid: u32,
    /// [`STACK_KERNEL`] or [`STACK_USER`], with [`STACK_TRUNCATED`], [`STACK_JAVA_ANCHOR`].
    pub flags: u32,
    /// Innermost first.
    pub frames: Vec<StackFrame>,
}

impl Stack {
    /// Whether the frames are kernel addresses.
    pub fn is_kernel(&self) -> bool {
        self.flags & STACK_KERNEL != 0
    }
}

/// u32 id, tgid, flags, frame count, then each frame's pc and, in a user
/// stack, its `method`.
impl Wire for Stack {
    fn put(&self, out: &mut Vec<u8>) {
        for v in [self.id, self.tgid, self.flags, self.frames.len() as u32] {
            v.put(out);
        }
        for f in &self.frames {
            f.pc.put(out);
            if !self.is_kernel() {
                f.method.put(out);
            }
        }
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let (id, tgid, flags, n) = (u32::get(c)?, u32::get(c)?, u32::get(c)?, u32::get(c)? as usize);
        let kernel = flags & STACK_KERNEL != 0;
        let per = if kernel { 8 } else { 16 };
        if c.rest().len() < n.checked_mul(per)? {
            return None;
        }
        let mut frames = Vec::with_capacity(n);
        for _ in 0..n {
            let pc = u64::get(c)?;
            let method = if kernel { 0 } else { u64::get(c)? };
            frames.push(StackFrame { pc, method });
        }
        Some(Stack {
            id,
            tgid,
            flags,
            frames,
        })
    }
}

/// Kernel payload of [`kind::CPU_SAMPLE`](crate::kind::CPU_SAMPLE): a
/// thread seen on CPU by the sampling clock, with its stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuSample {
    /// Process of the thread.
    pub tgid: u32,
    /// CPU it ran on.
    pub cpu: u32,
    /// Kernel stack id (0: none).
    pub kstack: u32,
    /// User stack id (0: none).
    pub ustack: u32,
}
wire! { CpuSample { tgid, cpu, kstack, ustack } }

/// Kernel payload of [`kind::MAPPING`](crate::kind::MAPPING), written by
/// the recorder: an executable mapping of a traced process, as
/// `/proc/<pid>/maps` showed it while the process lived, with the build id
/// of its file, so that its addresses can be symbolized after the process
/// is gone (and on another machine with the same binaries).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// The process.
    pub tgid: u32,
    /// First address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// GNU build id of the file (empty: none or not readable).
    pub build_id: Vec<u8>,
    /// Path of the file as the process saw it; "" for anonymous memory
    /// (JIT code), `[vdso]` and the like for the kernel's.
    pub path: String,
}

/// Longest build id a [`Mapping`] holds (SHA-1: 20 bytes).
pub const BUILD_ID_MAX: usize = 20;

/// u32 tgid, u32 build id length, u64 start, end, offset, the build id in
/// 24 bytes (zero-padded), str path.
impl Wire for Mapping {
    fn put(&self, out: &mut Vec<u8>) {
        let id = &self.build_id[..self.build_id.len().min(BUILD_ID_MAX)];
        self.tgid.put(out);
        (id.len() as u32).put(out);
        for v in [self.start, self.end, self.offset] {
            v.put(out);
        }
        let mut b = [0u8; 24];
        b[..id.len()].copy_from_slice(id);
        out.extend_from_slice(&b);
        self.path.put(out);
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let tgid = u32::get(c)?;
        let id_len = (u32::get(c)? as usize).min(BUILD_ID_MAX);
        let (start, end, offset) = (u64::get(c)?, u64::get(c)?, u64::get(c)?);
        let build_id = c.take(24)?[..id_len].to_vec();
        Some(Mapping {
            tgid,
            start,
            end,
            offset,
            build_id,
            path: String::get(c)?,
        })
    }
}

/// Kernel payload of [`kind::KSYM`](crate::kind::KSYM), written by the
/// recorder: a kernel function some stack of the trace is in, from
/// `/proc/kallsyms` at record time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ksym {
    /// Its first address.
    pub start: u64,
    /// The next symbol's address (exclusive end).
    pub end: u64,
    /// Its name, with ` [module]` for a module's.
    pub name: String,
}
wire! { Ksym { start, end, name } }

/// [`CodeBlob::kind`]: HotSpot's template interpreter (its frames hold a `Method*`).
pub const CODE_INTERPRETER: u32 = 1;
/// [`CodeBlob::kind`]: any other generated code (stubs, adapters).
pub const CODE_STUB: u32 = 2;

/// JVM payload of [`kind::CODE_BLOB`](crate::kind::CODE_BLOB): code the
/// JVM generated that is not a compiled method (JVMTI DynamicCodeGenerated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodeBlob {
    /// First address.
    pub start: u64,
    /// Size in bytes.
    pub size: u32,
    /// [`CODE_INTERPRETER`] or [`CODE_STUB`].
    pub kind: u32,
    /// HotSpot's name for it.
    pub name: String,
}
wire! { CodeBlob { start, size, kind, name } }

/// JVM payload of [`kind::NATIVE_BIND`](crate::kind::NATIVE_BIND): the
/// function a Java native method is bound to, named by the dynamic linker
/// (the symbol that starts exactly there).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NativeBind {
    /// The function's address.
    pub addr: u64,
    /// The method's id (METHOD_DEF).
    pub method: u64,
    /// The function's symbol (`Java_sun_nio_ch_SocketDispatcher_read0`).
    pub name: String,
}
wire! { NativeBind { addr, method, name } }

/// The frames of compiled code at one pc: the method whose code it is,
/// and the methods inlined into it there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PcInline {
    /// Code address (a call's return address, or another safepoint pc).
    pub pc: u64,
    /// Method ids (METHOD_DEF), innermost (the inlined leaf) first; the
    /// last is the compiled method itself.
    pub methods: Vec<u64>,
}

/// JVM payload of [`kind::COMPILED_INLINE`](crate::kind::COMPILED_INLINE):
/// what a COMPILED_METHOD_LOAD's code holds (its tier, and its inlining
/// per pc); written after it, possibly as several records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompiledInline {
    /// Start of the compiled code (its COMPILED_METHOD_LOAD's `code_addr`).
    pub code_addr: u64,
    /// Compilation level: 1–3 C1, 4 C2, 0 not known.
    pub tier: u32,
    /// Inlining by pc, in pc order.
    pub pcs: Vec<PcInline>,
}

/// u64 code_addr, u32 tier, u32 count, then per pc: u64 pc, u32 depth, u32
/// reserved, depth × u64 method.
impl Wire for CompiledInline {
    fn put(&self, out: &mut Vec<u8>) {
        self.code_addr.put(out);
        self.tier.put(out);
        (self.pcs.len() as u32).put(out);
        for pc in &self.pcs {
            pc.pc.put(out);
            (pc.methods.len() as u32).put(out);
            0u32.put(out);
            for m in &pc.methods {
                m.put(out);
            }
        }
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let (code_addr, tier, n) = (u64::get(c)?, u32::get(c)?, u32::get(c)? as usize);
        let mut pcs = Vec::with_capacity(n.min(c.rest().len() / 16));
        for _ in 0..n {
            let (pc, depth, _) = (u64::get(c)?, u32::get(c)? as usize, u32::get(c)?);
            let mut methods = Vec::with_capacity(depth.min(c.rest().len() / 8));
            for _ in 0..depth {
                methods.push(u64::get(c)?);
            }
            pcs.push(PcInline { pc, methods });
        }
        Some(CompiledInline { code_addr, tier, pcs })
    }
}

/// JVM payload of [`kind::METHOD_ADDRS`](crate::kind::METHOD_ADDRS): the
/// HotSpot `Method*` of methods (what an interpreted frame holds), each
/// with its method id (METHOD_DEF).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MethodAddrs {
    /// (`Method*`, method id) pairs.
    pub methods: Vec<(u64, u64)>,
}

/// u32 count, u32 reserved, then count × (u64 `Method*`, u64 method id).
impl Wire for MethodAddrs {
    fn put(&self, out: &mut Vec<u8>) {
        (self.methods.len() as u32).put(out);
        0u32.put(out);
        for &(addr, m) in &self.methods {
            addr.put(out);
            m.put(out);
        }
    }
    fn get(c: &mut Cursor<'_>) -> Option<Self> {
        let (n, _) = (u32::get(c)? as usize, u32::get(c)?);
        let mut methods = Vec::with_capacity(n.min(c.rest().len() / 16));
        for _ in 0..n {
            methods.push((u64::get(c)?, u64::get(c)?));
        }
        Some(MethodAddrs { methods })
    }
}
