//! Reading and writing tensors through raw host addresses: typed element access, chunk
//! conversions to and from f32, the dense-row iteration, and the store of finished convolution
//! results (α/β, epilogue).

pub mod access;
pub mod convert;
pub mod dense;
pub mod conv_out;
