//! Element types conflux computes with, and their conversions to and from f32/f64.

use crate::types::DataType;
use half::{bf16, f16};

/// A tensor element type. The 16-bit types are stored narrow and computed in f32.
pub trait Element: Copy + Send + Sync + PartialEq + std::fmt::Debug + Default + 'static {
    const DTYPE: DataType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

impl Element for f32 {
    const DTYPE: DataType = DataType::Float;
    fn to_f64(self) -> f64 { self as f64 }
    fn from_f64(v: f64) -> Self { v as f32 }
    fn to_f32(self) -> f32 { self }
    fn from_f32(v: f32) -> Self { v }
}

impl Element for f64 {
    const DTYPE: DataType = DataType::Double;
    fn to_f64(self) -> f64 { self }
    fn from_f64(v: f64) -> Self { v }
    fn to_f32(self) -> f32 { self as f32 }
    fn from_f32(v: f32) -> Self { v as f64 }
}

impl Element for f16 {
    const DTYPE: DataType = DataType::Half;
    fn to_f64(self) -> f64 { f16::to_f64(self) }
    fn from_f64(v: f64) -> Self { f16::from_f64(v) }
    fn to_f32(self) -> f32 { f16::to_f32(self) }
    fn from_f32(v: f32) -> Self { f16::from_f32(v) }
}

impl Element for bf16 {
    const DTYPE: DataType = DataType::BFloat16;
    fn to_f64(self) -> f64 { bf16::to_f64(self) }
    fn from_f64(v: f64) -> Self { bf16::from_f64(v) }
    fn to_f32(self) -> f32 { bf16::to_f32(self) }
    fn from_f32(v: f32) -> Self { bf16::from_f32(v) }
}

/// Convert f64 values to the bytes of `dtype` (little-endian, as in memory).
pub fn encode(dtype: DataType, values: &[f64]) -> Vec<u8> {
    fn enc<T: Element>(values: &[f64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * std::mem::size_of::<T>());
        for &v in values {
            let t = T::from_f64(v);
            // SAFETY: T is a plain numeric type; viewing its bytes is sound.
            let bytes = unsafe {
                std::slice::from_raw_parts(&t as *const T as *const u8, std::mem::size_of::<T>())
            };
            out.extend_from_slice(bytes);
        }
        out
    }
    match dtype {
        DataType::Float => enc::<f32>(values),
        DataType::Double => enc::<f64>(values),
        DataType::Half => enc::<f16>(values),
        DataType::BFloat16 => enc::<bf16>(values),
        DataType::Int32 => values.iter().flat_map(|&v| crate::quant::to_i32(v as f32).to_le_bytes()).collect(),
        // Quantized types store the nearest code (round half to even, saturating).
        DataType::Int8 => values.iter().map(|&v| crate::quant::to_i8(v as f32) as u8).collect(),
        DataType::Float8 | DataType::BFloat8 => {
            let f = crate::quant::Fp8::of(dtype).expect("an fp8 type");
            values.iter().map(|&v| f.encode(v as f32, crate::quant::Rounding::Nearest)).collect()
        }
        other => panic!("encode: {other:?} is not a type conflux computes with"),
    }
}

/// Convert bytes of `dtype` to f64 values.
pub fn decode(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    fn dec<T: Element>(bytes: &[u8]) -> Vec<f64> {
        let n = bytes.len() / std::mem::size_of::<T>();
        (0..n)
            .map(|i| {
                // SAFETY: in bounds; read_unaligned handles any alignment.
                let v: T = unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(i * std::mem::size_of::<T>()) as *const T) };
                v.to_f64()
            })
            .collect()
    }
    match dtype {
        DataType::Float => dec::<f32>(bytes),
        DataType::Double => dec::<f64>(bytes),
        DataType::Half => dec::<f16>(bytes),
        DataType::BFloat16 => dec::<bf16>(bytes),
        DataType::Int32 => bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        DataType::Int8 => bytes.iter().map(|&b| b as i8 as f64).collect(),
        DataType::Float8 | DataType::BFloat8 => {
            let f = crate::quant::Fp8::of(dtype).expect("an fp8 type");
            bytes.iter().map(|&b| f.decode(b) as f64).collect()
        }
        other => panic!("decode: {other:?} is not a type conflux computes with"),
    }
}

/// Round an f64 value to what `dtype` can hold (used to build exact references).
pub fn round_to(dtype: DataType, v: f64) -> f64 {
    match dtype {
        DataType::Float => v as f32 as f64,
        DataType::Half => f16::from_f64(v).to_f64(),
        DataType::BFloat16 => bf16::from_f64(v).to_f64(),
        DataType::Int8 => v.round_ties_even().clamp(-128.0, 127.0),
        DataType::Int32 => v.round_ties_even().clamp(i32::MIN as f64, i32::MAX as f64),
        DataType::Float8 | DataType::BFloat8 => {
            let f = crate::quant::Fp8::of(dtype).expect("an fp8 type");
            f.decode(f.encode(v as f32, crate::quant::Rounding::Nearest)) as f64
        }
        _ => v,
    }
}
