//! 1×1 convolutions (stride 1, no padding), f32. Forward: output channels in the vector lanes
//! (`channels`, its micro-tiles in `channels_kernel`), spatial positions in the lanes
//! (`positions`, `positions_kernel`), and AMX tiles at f32 accuracy (`amx`); backward-weights as
//! dot products of channel rows (`weights`) or, on small maps, with the input channels in the
//! lanes of the forward positions tiles (`weights_lanes`).

pub mod amx;
pub mod channels;
pub mod channels_kernel;
pub mod positions;
pub mod positions_kernel;
pub mod weights;
pub mod weights_lanes;
