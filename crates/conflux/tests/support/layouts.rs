//! Float descriptors in several layouts and a seeded generator of small random convolution
//! geometries, for the reference tests (what `tests/common` held).

use super::{desc, ConvCase, Lay, SplitMix64};
use conflux::types::{ConvMode, DataType, Layout};
use conflux::{ConvDesc, TensorDesc};

/// Packed N,C,(D,)H,W Float descriptor.
pub fn packed(lens: &[usize]) -> TensorDesc {
    TensorDesc::new(DataType::Float, lens).unwrap()
}

/// Channels-last (NHWC / NDHWC) descriptor; lens stay in N,C,(D,)H,W order.
pub fn channels_last(lens: &[usize]) -> TensorDesc {
    let layout = if lens.len() == 5 { Layout::NDHWC } else { Layout::NHWC };
    TensorDesc::with_layout(DataType::Float, layout, lens).unwrap()
}

/// Row-major strides with a gap after every row of every dimension (each extent padded by
/// one), so the descriptor is not packed and gaps exist between all elements' rows.
pub fn gapped(lens: &[usize]) -> TensorDesc {
    desc(DataType::Float, lens, Lay::Gapped)
}

/// One of the three layouts, picked by `which` (0 packed, 1 channels-last, 2 gapped).
pub fn layout(which: u64, lens: &[usize]) -> TensorDesc {
    match which % 3 {
        0 => packed(lens),
        1 => channels_last(lens),
        _ => gapped(lens),
    }
}

/// Random geometry: 2-D or 3-D, pad 0..2, stride 1..3, dilation 1..2, groups 1..3 (with
/// depthwise shapes among them), transpose a third of the time, strided layouts mixed in.
pub fn random_case(r: &mut SplitMix64) -> ConvCase {
    loop {
        let nd = if r.next_int(0, 2) == 0 { 3 } else { 2 };
        let transpose = r.next_int(0, 2) == 0;
        let g = r.next_int(1, 3) as usize;
        let (cg, kg) = (r.next_int(1, 2) as usize, r.next_int(1, 2) as usize);
        let n = r.next_int(1, 2) as usize;
        let max_in = if nd == 3 { 4 } else { 6 };
        let (mut pads, mut strides, mut dils, mut ks, mut ins, mut adj) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..nd {
            pads.push(r.next_int(0, 2));
            strides.push(r.next_int(1, 3));
            dils.push(r.next_int(1, 2));
            ks.push(r.next_int(1, 3) as usize);
            ins.push(r.next_int(1, max_in) as usize);
            adj.push(0);
        }
        let mode = if transpose { ConvMode::Transpose } else { ConvMode::Convolution };
        let mut conv = ConvDesc::new(mode, &pads, &strides, &dils).unwrap();
        conv.set_groups(g as i64).unwrap();
        if transpose {
            for i in 0..nd {
                adj[i] = r.next_int(0, strides[i] - 1);
            }
            conv.set_out_pads(&adj).unwrap();
        }
        // Filter K × C/G × k…; for transpose K is the input's channel count.
        let mut wl = vec![kg * g, cg];
        wl.extend(&ks);
        let in_c = if transpose { kg * g } else { cg * g };
        let mut xl = vec![n, in_c];
        xl.extend(&ins);
        let probe_x = packed(&xl);
        let probe_w = packed(&wl);
        let Ok(yl) = conv.output_lens(&probe_x, &probe_w) else { continue };
        // Keep the work tiny.
        if yl.iter().product::<usize>() > 400 {
            continue;
        }
        return ConvCase {
            x: layout(r.next_u64(), &xl),
            w: layout(r.next_u64(), &wl),
            y: layout(r.next_u64(), &yl),
            conv,
        };
    }
}
