//! The agent's stream file: [`file`](mod@file), the memory-mapped file
//! and its grower, within the sizes of [`limits`]; [`chunks`], a ring
//! recording's chunk files and what their prologues restate.

pub(crate) mod chunks;
pub(crate) mod file;
mod limits;
