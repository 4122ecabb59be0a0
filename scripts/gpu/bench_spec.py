# The precisions the cuDNN comparison scripts (bench_cba.py, bench_bwd.py) measure, in one place.
# name: (torch dtype name, channels_last, conflux dtype, conflux layout). fp32* are strict f32 on
# both sides; tf32* allow TF32 on both sides (cuDNN: torch.backends.cudnn.allow_tf32; conflux:
# the descriptor's ALLOW_TF32 attribute, the conflux dtype "tf32").
SPEC = {
    "fp32": ("float32", False, "f32", "nchw"),
    "fp32nhwc": ("float32", True, "f32", "nhwc"),
    "tf32": ("float32", True, "tf32", "nhwc"),
    "tf32nchw": ("float32", False, "tf32", "nchw"),
    "fp16": ("float16", True, "f16", "nhwc"),
    "bf16": ("bfloat16", True, "bf16", "nhwc"),
    "fp16nchw": ("float16", False, "f16", "nchw"),
}
