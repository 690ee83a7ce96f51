//! HotSpot (`libjvm.so`) functions, by their mangled (Itanium C++ ABI)
//! symbol names, which `libjvm.so` keeps among its local symbols.

/// Symbol of HotSpot's `SafepointSynchronize::begin()`: the kernel recorder
/// probes it as a library call (LIB_CALL); a safepoint starts when it is called.
pub const SAFEPOINT_BEGIN_SYMBOL: &str = "_ZN20SafepointSynchronize5beginEv";

/// Symbol of HotSpot's `SafepointSynchronize::end()`: the safepoint is over when it returns.
pub const SAFEPOINT_END_SYMBOL: &str = "_ZN20SafepointSynchronize3endEv";
