"""conflux.conv2d against PyTorch: every activation, dtype, layout and geometry; numpy in,
numpy out; torch in, torch out (device, dtype, memory format)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import conflux
from conftest import rel_l2

ACTS = {
    None: lambda t: t,
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.01),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "elu": F.elu,
    "silu": F.silu,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "mish": F.mish,
}

GEOMETRIES = [
    # (N, C, H, W, K, kh, kw, stride, padding, dilation, groups)
    (2, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1),
    (1, 16, 14, 14, 32, 1, 1, 2, 0, 1, 1),
    (2, 3, 17, 17, 8, 7, 7, 2, 3, 1, 1),
    (2, 12, 10, 10, 12, 3, 3, 1, 1, 1, 12),  # depthwise
    (1, 16, 12, 12, 32, 3, 3, 2, 1, 1, 4),  # grouped, strided
    (1, 8, 13, 13, 8, 3, 3, 1, 2, 2, 1),  # dilated
    (2, 6, 9, 15, 10, 1, 7, 1, (0, 3), 1, 1),  # 1×7
]


def reference(x, w, b, stride, padding, dilation, groups, act, residual=None):
    y = F.conv2d(x.double(), w.double(), None if b is None else b.double(), stride, padding, dilation, groups)
    if residual is not None:
        y = y + residual.double()
    return ACTS[act](y)


def data(shape, dtype, device, seed, integers=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(-3, 4, shape, generator=g).float() if integers else torch.randn(shape, generator=g)
    return t.to(dtype=dtype, device=device)


@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:7])))
@pytest.mark.parametrize("act", list(ACTS))
def test_geometries_and_activations(device, geom, act):
    n, c, h, w_, k, kh, kw, stride, padding, dilation, groups = geom
    x = data((n, c, h, w_), torch.float32, device, 1)
    w = data((k, c // groups, kh, kw), torch.float32, device, 2) * 0.3
    b = data((k,), torch.float32, device, 3)
    y = conflux.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups, activation=act)
    ref = reference(x, w, b, stride, padding, dilation, groups, act)
    assert y.shape == ref.shape and y.dtype == x.dtype and y.device == x.device
    assert rel_l2(y.cpu(), ref.cpu()) < 1e-5


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dtypes_and_layouts(device, layout, dtype):
    x = data((2, 16, 12, 12), dtype, device, 4)
    w = (data((24, 16, 3, 3), torch.float32, device, 5) * 0.2).to(dtype)
    b = data((24,), dtype, device, 6)
    res = data((2, 24, 12, 12), dtype, device, 7)
    if layout == "channels_last":
        x, w, res = (t.contiguous(memory_format=torch.channels_last) for t in (x, w, res))
    y = conflux.conv2d(x, w, b, padding=1, activation="relu", residual=res)
    ref = reference(x, w, b, 1, 1, 1, 1, "relu", res)
    assert y.dtype == dtype
    assert y.is_contiguous(memory_format=torch.channels_last) == (layout == "channels_last")
    tol = 1e-5 if dtype == torch.float32 else (2e-3 if dtype == torch.float16 else 1e-2)
    assert rel_l2(y.float().cpu(), ref.cpu()) < tol


def test_exact_small_integers(device):
    """Small integers and 1×1 / 3×3 filters: every product and sum is exact in f32."""
    x = data((2, 8, 10, 10), torch.float32, device, 8, integers=True)
    w = data((8, 8, 3, 3), torch.float32, device, 9, integers=True)
    b = data((8,), torch.float32, device, 10, integers=True)
    y = conflux.conv2d(x, w, b, padding=1, activation="relu")
    ref = reference(x, w, b, 1, 1, 1, 1, "relu")
    assert torch.equal(y.double().cpu(), ref.cpu())


def test_numpy_in_numpy_out():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 7, 7), dtype=np.float32)
    w = rng.standard_normal((6, 4, 3, 3), dtype=np.float32)
    y = conflux.conv2d(x, w, stride=2, padding=1, activation="tanh")
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    ref = reference(torch.from_numpy(x), torch.from_numpy(w), None, 2, 1, 1, 1, "tanh")
    assert rel_l2(y, ref) < 1e-5


def test_numpy_channels_last_view():
    """A channels-last numpy view (an NHWC array transposed) keeps its layout."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 5, 8), dtype=np.float32).transpose(0, 3, 1, 2)
    w = rng.standard_normal((4, 8, 1, 1), dtype=np.float32)
    y = conflux.conv2d(x, w)
    assert y.strides[1] == y.itemsize  # channels innermost
    ref = reference(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(w), None, 1, 0, 1, 1, None)
    assert rel_l2(y, ref) < 1e-5


def test_strided_input_is_copied_not_misread(device):
    x = data((2, 8, 12, 20), torch.float32, device, 11)[:, :, :, ::2]  # not packed
    w = data((4, 8, 3, 3), torch.float32, device, 12)
    y = conflux.conv2d(x, w, padding=1)
    assert rel_l2(y.cpu(), reference(x, w, None, 1, 1, 1, 1, None).cpu()) < 1e-5


def test_plans_are_compiled_once(device):
    x = data((1, 8, 8, 8), torch.float32, device, 13)
    w = data((8, 8, 3, 3), torch.float32, device, 14)
    conflux.conv2d(x, w, padding=1, activation="relu")
    before = conflux.plan_count()
    for seed in range(3):
        conflux.conv2d(data((1, 8, 8, 8), torch.float32, device, seed), w, padding=1, activation="relu")
    assert conflux.plan_count() == before


def test_padding_same_and_valid(device):
    x = data((1, 4, 9, 9), torch.float32, device, 15)
    w = data((4, 4, 5, 5), torch.float32, device, 16)
    assert rel_l2(conflux.conv2d(x, w, padding="same").cpu(), reference(x, w, None, 1, 2, 1, 1, None).cpu()) < 1e-5
    assert conflux.conv2d(x, w, padding="valid").shape == (1, 4, 5, 5)


def test_gpu_scratch_comes_from_the_callers_allocator():
    """On CUDA, scratch a kernel needs is taken from the installed allocator (torch's caching
    allocator by default) and every block is given back."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA only")
    import conflux._device as dev

    live, count = {}, [0]

    def alloc(n):
        t = torch.empty(n, dtype=torch.uint8, device="cuda:0")
        live[t.data_ptr()] = t
        count[0] += 1
        return t.data_ptr()

    def free(p):
        live.pop(p)

    conflux.set_allocator("cuda:0", alloc, free)
    try:
        # NCHW f16 on the tensor cores goes through channels-last copies held in scratch.
        x = data((4, 64, 28, 28), torch.float16, "cuda", 20)
        w = (data((64, 64, 3, 3), torch.float32, "cuda", 21) * 0.05).half()
        y = conflux.conv2d(x, w, padding=1, activation="relu")
        torch.cuda.synchronize()
        assert count[0] > 0 and not live
        assert rel_l2(y.float().cpu(), reference(x, w, None, 1, 1, 1, 1, "relu").cpu()) < 2e-3
    finally:
        conflux.set_allocator("cuda:0", *dev._torch_allocator("cuda:0"))
