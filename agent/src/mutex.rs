//! Locking a mutex that a panic elsewhere poisoned.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: a panic elsewhere must not stop the
/// agent from finalising what it has (encoded records are always whole).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
