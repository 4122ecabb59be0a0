"""conflux.torch.fuse on torchvision-style models: same outputs as eager, a census that says
what was fused and why the rest was not, CPU and CUDA, fp32/fp16/bf16, NCHW and channels_last."""

import pytest
import torch

import conflux
import conflux.torch
from conflux.torch import FusedConv2d
from conftest import rel_l2
from models import TinyEfficientNet, TinyMobileNet, TinyResNet, randomize_bn

MODELS = {"resnet": TinyResNet, "mobilenet": TinyMobileNet, "efficientnet": TinyEfficientNet}


def build(name, device, dtype=torch.float32, channels_last=False):
    torch.manual_seed(0)
    m = randomize_bn(MODELS[name]()).eval().to(device=device, dtype=dtype)
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
    return m


def inputs(device, dtype=torch.float32, channels_last=False, n=2, size=32):
    x = torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(1)).to(device=device, dtype=dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("channels_last", [False, True])
def test_same_outputs_fp32(device, name, channels_last):
    model = build(name, device, channels_last=channels_last)
    fused = conflux.torch.fuse(model)
    x = inputs(device, channels_last=channels_last)
    with torch.no_grad():
        ref, out = model(x), fused(x)
    assert rel_l2(out.double().cpu(), ref.double().cpu()) < 1e-4
    assert any(isinstance(m, FusedConv2d) for m in fused.modules())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types_agree_in_class(device, dtype):
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("PyTorch's CPU fp16 convolution is the slow reference path; covered by bf16")
    model = build("resnet", device)
    fused = conflux.torch.fuse(model).to(dtype)
    x = inputs(device, n=16)
    with torch.no_grad():
        ref = model(x).argmax(1)
        out = fused(x.to(dtype)).float().argmax(1)
    assert (ref == out).float().mean() >= 0.9


def test_census_resnet(capsys):
    fused = conflux.torch.fuse(build("resnet", "cpu"), report=True)
    text = capsys.readouterr().out
    assert text == fused.conflux_census + "\n"
    assert "10 of 10 convolutions run on conflux" in text
    assert "conv1: Conv2d → BatchNorm2d → relu" in text
    assert "layer1.conv2: Conv2d → BatchNorm2d → add → relu" in text
    assert "layer3.downsample.0: Conv2d → BatchNorm2d → add → relu" in text
    assert "left in PyTorch: AdaptiveAvgPool2d, Linear, MaxPool2d, flatten" in text


def test_efficientnet_silu_chains():
    fused = conflux.torch.fuse(build("efficientnet", "cpu"))
    assert "stem.0: Conv2d → BatchNorm2d → silu" in fused.conflux_census
    assert "dw.0: Conv2d → BatchNorm2d → silu" in fused.conflux_census
    assert "se_reduce: Conv2d+bias → relu" in fused.conflux_census


def test_mobilenet_relu6_and_residual_chain():
    fused = conflux.torch.fuse(build("mobilenet", "cpu"))
    text = fused.conflux_census
    assert "features.0.0: Conv2d → BatchNorm2d → relu6" in text
    assert "features.1.conv.6: Conv2d → BatchNorm2d → add" in text


def test_training_mode_is_refused():
    with pytest.raises(ValueError, match="eval"):
        conflux.torch.fuse(TinyResNet())


def test_fused_model_follows_new_weights():
    model = build("resnet", "cpu")
    fused = conflux.torch.fuse(model)
    x = inputs("cpu")
    with torch.no_grad():
        for p in fused.parameters():
            p.mul_(0.5)
        for p in model.parameters():
            p.mul_(0.5)
        assert rel_l2(fused(x), model(x)) < 1e-4


def test_example_input_times_every_chain(device):
    model = build("resnet", device)
    x = inputs(device)
    fused = conflux.torch.fuse(model, example_input=x)
    mods = [m for m in fused.modules() if isinstance(m, FusedConv2d)]
    assert "timed on the example input" in fused.conflux_census
    kept = sum(not m.use_conflux for m in mods)
    assert fused.conflux_census.count("(PyTorch was faster on the example input)") == kept
    assert f"{len(mods) - kept} of 10 convolutions run on conflux" in fused.conflux_census
    with torch.no_grad():
        assert rel_l2(fused(x).double().cpu(), model(x).double().cpu()) < 1e-4
    # The PyTorch path of a chain computes the same thing.
    for m in mods:
        m.use_conflux = False
    with torch.no_grad():
        assert rel_l2(fused(x).double().cpu(), model(x).double().cpu()) < 1e-5


def test_replaced_parameters_and_new_shapes_are_seen(device):
    model = build("resnet", device)
    fused = conflux.torch.fuse(model)
    x = inputs(device)
    with torch.no_grad():
        fused(x)
        fused(x)  # the second call takes the bound fast path
        new = torch.nn.Parameter(torch.randn_like(model.layer1.conv1.weight))
        model.layer1.conv1.weight = new
        fused.layer1_conv1_conflux.conv.weight = torch.nn.Parameter(new.detach().clone())
        assert rel_l2(fused(x).cpu(), model(x).cpu()) < 1e-4
        x2 = inputs(device, n=3, size=40)
        assert rel_l2(fused(x2).cpu(), model(x2).cpu()) < 1e-4


def test_example_input_without_tuning_compiles_every_plan():
    before = conflux.plan_count()
    model = build("mobilenet", "cpu")
    x = inputs("cpu", n=3, size=36)
    fused = conflux.torch.fuse(model, example_input=x, tune=False)
    assert conflux.plan_count() > before
    assert all(m._fast is not None and m.use_conflux for m in fused.modules() if isinstance(m, FusedConv2d))
    compiled = conflux.plan_count()
    with torch.no_grad():
        assert rel_l2(fused(x), model(x)) < 1e-4
    assert conflux.plan_count() == compiled


def test_cuda_graph_capture_replays_fused_model():
    """A fused model is captured into a CUDA graph and replayed: no conflux call synchronizes
    with the host (capture would fail) and every launch follows torch's current stream."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA only")
    model = build("resnet", "cuda")
    fused = conflux.torch.fuse(model)
    static_x = inputs("cuda")
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fused(static_x)  # plans compiled, fast paths bound, before capture
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = fused(static_x)
        for seed in (5, 6):
            static_x.copy_(inputs("cuda", n=2).mul_(seed / 5))
            graph.replay()
            torch.cuda.synchronize()
            assert rel_l2(static_y.cpu(), model(static_x).cpu()) < 1e-4
