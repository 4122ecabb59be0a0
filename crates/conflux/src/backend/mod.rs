//! Device backends: kernels and launch logic. Solvers (in `solver/`) decide what runs; the
//! backends hold how it runs.

pub mod cpu;
pub mod cuda;
