//! Convolution descriptor functions (reference doc §1c, functions 1–15). The functions that
//! run or search convolutions are in `conv_run.rs`.

use crate::guard::{create, destroy, enum_arg, guard, non_negative, obj, obj_mut, slice, write_opt, CStatus};
use crate::tensor::{desc, MiopenTensor};
use conflux::{bail, ConvAttrib, ConvDesc, ConvMode, Result, Status};

pub type MiopenConv = *mut ConvDesc;

/// The descriptor behind a C argument (NULL → BadParm).
///
/// # Safety
/// A non-NULL `c` must come from `miopenCreateConvolutionDescriptor` and be alive.
pub unsafe fn conv<'a>(c: *const ConvDesc) -> Result<&'a ConvDesc> {
    obj(c, "convolution descriptor")
}

unsafe fn conv_mut<'a>(c: MiopenConv) -> Result<&'a mut ConvDesc> {
    obj_mut(c, "convolution descriptor")
}

/// The 2-D getters and setters refuse other dimensionalities with UnknownError (MIOpen's
/// message-only throw).
fn need_2d(c: &ConvDesc, what: &str) -> Result<()> {
    if c.spatial_dims() != 2 {
        bail!(UnknownError, "{what}: the descriptor is {}-D; this call is for 2-D convolutions", c.spatial_dims());
    }
    Ok(())
}

fn ints(v: &[usize]) -> Vec<i32> {
    v.iter().map(|&x| x as i32).collect()
}

#[no_mangle]
pub unsafe extern "C" fn miopenCreateConvolutionDescriptor(conv_desc: *mut MiopenConv) -> CStatus {
    guard("miopenCreateConvolutionDescriptor", || create(conv_desc, "convolution descriptor pointer", || Ok(ConvDesc::default())))
}

#[no_mangle]
pub unsafe extern "C" fn miopenDestroyConvolutionDescriptor(conv_desc: MiopenConv) -> CStatus {
    guard("miopenDestroyConvolutionDescriptor", || {
        destroy(conv_desc);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenInitConvolutionDescriptor(
    conv_desc: MiopenConv,
    c_mode: i32,
    pad_h: i32,
    pad_w: i32,
    stride_h: i32,
    stride_w: i32,
    dilation_h: i32,
    dilation_w: i32,
) -> CStatus {
    guard("miopenInitConvolutionDescriptor", || {
        let c = conv_mut(conv_desc)?;
        let mode: ConvMode = enum_arg(c_mode)?;
        let i = |v: i32| v as i64;
        c.init(mode, &[i(pad_h), i(pad_w)], &[i(stride_h), i(stride_w)], &[i(dilation_h), i(dilation_w)])
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenInitConvolutionNdDescriptor(
    conv_desc: MiopenConv,
    spatial_dim: i32,
    pad_a: *const i32,
    stride_a: *const i32,
    dilation_a: *const i32,
    c_mode: i32,
) -> CStatus {
    guard("miopenInitConvolutionNdDescriptor", || {
        let c = conv_mut(conv_desc)?;
        let mode: ConvMode = enum_arg(c_mode)?;
        let n = non_negative(spatial_dim, "spatialDim", Status::BadParm)?;
        let arr = |p: *const i32, what: &str| -> Result<Vec<i64>> {
            Ok(slice(p, n, what, Status::BadParm)?.iter().map(|&v| v as i64).collect())
        };
        c.init(mode, &arr(pad_a, "padA")?, &arr(stride_a, "strideA")?, &arr(dilation_a, "dilationA")?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionSpatialDim(conv_desc: MiopenConv, spatial_dim: *mut i32) -> CStatus {
    guard("miopenGetConvolutionSpatialDim", || {
        *obj_mut(spatial_dim, "spatialDim output")? = conv(conv_desc)?.spatial_dims() as i32;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionDescriptor(
    conv_desc: MiopenConv,
    c_mode: *mut i32,
    pad_h: *mut i32,
    pad_w: *mut i32,
    stride_h: *mut i32,
    stride_w: *mut i32,
    dilation_h: *mut i32,
    dilation_w: *mut i32,
) -> CStatus {
    guard("miopenGetConvolutionDescriptor", || {
        let c = conv(conv_desc)?;
        need_2d(c, "miopenGetConvolutionDescriptor")?;
        let outs = [c_mode, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w];
        for p in outs {
            obj_mut(p, "output")?;
        }
        let vals = [c.mode() as i32, c.pads()[0] as i32, c.pads()[1] as i32, c.strides()[0] as i32, c.strides()[1] as i32, c.dilations()[0] as i32, c.dilations()[1] as i32];
        for (p, v) in outs.into_iter().zip(vals) {
            *p = v;
        }
        Ok(())
    })
}

/// Copies `requestedSpatialDim` entries; spatialDim and c_mode outputs may be NULL.
#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionNdDescriptor(
    conv_desc: MiopenConv,
    requested_spatial_dim: i32,
    spatial_dim: *mut i32,
    pad_a: *mut i32,
    stride_a: *mut i32,
    dilation_a: *mut i32,
    c_mode: *mut i32,
) -> CStatus {
    guard("miopenGetConvolutionNdDescriptor", || {
        let c = conv(conv_desc)?;
        let n = non_negative(requested_spatial_dim, "requestedSpatialDim", Status::BadParm)?;
        if n > c.spatial_dims() {
            bail!(UnknownError, "requested {n} spatial dimensions of a {}-D convolution", c.spatial_dims());
        }
        write_opt(spatial_dim, c.spatial_dims() as i32);
        write_opt(c_mode, c.mode() as i32);
        for (p, v, what) in [(pad_a, c.pads(), "padA"), (stride_a, c.strides(), "strideA"), (dilation_a, c.dilations(), "dilationA")] {
            if n > 0 {
                obj_mut(p, what)?;
                std::slice::from_raw_parts_mut(p, n).copy_from_slice(&ints(&v[..n]));
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionGroupCount(conv_desc: MiopenConv, group_count: *mut i32) -> CStatus {
    guard("miopenGetConvolutionGroupCount", || {
        *obj_mut(group_count, "groupCount output")? = conv(conv_desc)?.groups() as i32;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetConvolutionGroupCount(conv_desc: MiopenConv, group_count: i32) -> CStatus {
    guard("miopenSetConvolutionGroupCount", || conv_mut(conv_desc)?.set_groups(group_count as i64))
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetTransposeConvOutputPadding(conv_desc: MiopenConv, adj_h: i32, adj_w: i32) -> CStatus {
    guard("miopenSetTransposeConvOutputPadding", || {
        let c = conv_mut(conv_desc)?;
        need_2d(c, "miopenSetTransposeConvOutputPadding")?;
        c.set_out_pads(&[adj_h as i64, adj_w as i64])
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetTransposeConvNdOutputPadding(conv_desc: MiopenConv, spatial_dim: i32, adj_a: *const i32) -> CStatus {
    guard("miopenSetTransposeConvNdOutputPadding", || {
        let c = conv_mut(conv_desc)?;
        let n = non_negative(spatial_dim, "spatialDim", Status::BadParm)?;
        let adj: Vec<i64> = slice(adj_a, n, "adjA", Status::BadParm)?.iter().map(|&v| v as i64).collect();
        c.set_out_pads(&adj)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionForwardOutputDim(
    conv_desc: MiopenConv,
    input_tensor_desc: MiopenTensor,
    filter_desc: MiopenTensor,
    n: *mut i32,
    c: *mut i32,
    h: *mut i32,
    w: *mut i32,
) -> CStatus {
    guard("miopenGetConvolutionForwardOutputDim", || {
        let cd = conv(conv_desc)?;
        need_2d(cd, "miopenGetConvolutionForwardOutputDim")?;
        let lens = cd.output_lens(desc(input_tensor_desc, "input descriptor")?, desc(filter_desc, "filter descriptor")?)?;
        let outs = [n, c, h, w];
        for p in outs {
            obj_mut(p, "output")?;
        }
        for (p, v) in outs.into_iter().zip(ints(&lens)) {
            *p = v;
        }
        Ok(())
    })
}

/// Writes spatialDim + 2 lengths to outputTensorDimA.
#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionNdForwardOutputDim(
    conv_desc: MiopenConv,
    input_tensor_desc: MiopenTensor,
    filter_desc: MiopenTensor,
    n_dim: *mut i32,
    output_tensor_dim_a: *mut i32,
) -> CStatus {
    guard("miopenGetConvolutionNdForwardOutputDim", || {
        let cd = conv(conv_desc)?;
        let lens = cd.output_lens(desc(input_tensor_desc, "input descriptor")?, desc(filter_desc, "filter descriptor")?)?;
        let nd = obj_mut(n_dim, "nDim output")?;
        obj_mut(output_tensor_dim_a, "outputTensorDimA")?;
        *nd = lens.len() as i32;
        std::slice::from_raw_parts_mut(output_tensor_dim_a, lens.len()).copy_from_slice(&ints(&lens));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenSetConvolutionAttribute(conv_desc: MiopenConv, attr: i32, value: i32) -> CStatus {
    guard("miopenSetConvolutionAttribute", || {
        let c = conv_mut(conv_desc)?;
        let a: ConvAttrib = enum_arg(attr)?;
        c.set_attribute(a, value as i64)
    })
}

#[no_mangle]
pub unsafe extern "C" fn miopenGetConvolutionAttribute(conv_desc: MiopenConv, attr: i32, value: *mut i32) -> CStatus {
    guard("miopenGetConvolutionAttribute", || {
        let c = conv(conv_desc)?;
        let a: ConvAttrib = enum_arg(attr)?;
        *obj_mut(value, "value output")? = c.attribute(a);
        Ok(())
    })
}
