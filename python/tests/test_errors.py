"""Bad input raises conflux.Error (MIOpen status + reason naming the op and the cause), or
ValueError / NotImplementedError for Python-level arguments; nothing the caller owns is written."""

import numpy as np
import pytest
import torch

import conflux


def arrays(c=8, k=16):
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, c, 6, 6), dtype=np.float32), rng.standard_normal((k, c, 3, 3), dtype=np.float32)


def test_channel_mismatch_names_op_and_cause():
    x, _ = arrays()
    w = np.zeros((16, 4, 3, 3), np.float32)
    with pytest.raises(conflux.Error) as e:
        conflux.conv2d(x, w)
    assert e.value.status == 3 and e.value.status_name == "miopenStatusBadParm"
    assert "channels" in e.value.reason and "convolution" in e.value.reason


def test_unsupported_dtype():
    x, w = arrays()
    with pytest.raises(conflux.Error, match="data type"):
        conflux.conv2d(x.astype(np.int32), w)


def test_double_is_refused_with_reason():
    x, w = arrays()
    with pytest.raises(conflux.Error) as e:
        conflux.conv2d(x.astype(np.float64), w.astype(np.float64))
    assert e.value.reason


def test_bias_of_wrong_length():
    x, w = arrays()
    with pytest.raises(conflux.Error, match="b must be a packed vector of 16"):
        conflux.conv2d(x, w, np.zeros(15, np.float32))


def test_not_an_array():
    _, w = arrays()
    with pytest.raises(conflux.Error, match="not an array"):
        conflux.conv2d([[1.0]], w)


def test_wrong_rank():
    _, w = arrays()
    with pytest.raises(conflux.Error, match="4-D"):
        conflux.conv2d(np.zeros((8, 6, 6), np.float32), w)


def test_activation_names():
    x, w = arrays()
    with pytest.raises(ValueError, match="unknown activation"):
        conflux.conv2d(x, w, activation="swish2")
    with pytest.raises(ValueError, match="takes no parameter"):
        conflux.conv2d(x, w, activation=("silu", 0.5))


def test_mixed_devices_or_kinds():
    x, w = arrays()
    # A torch x with a numpy w is allowed on the CPU (both are host memory); the result is torch.
    assert isinstance(conflux.conv2d(torch.from_numpy(x), w), torch.Tensor)
    if torch.cuda.is_available():
        with pytest.raises(conflux.Error, match="is on cuda:0, x on cpu"):
            conflux.conv2d(torch.from_numpy(x), torch.from_numpy(w).cuda())


def test_plan_execute_writes_nothing_on_failure():
    x, w = arrays()
    plan = conflux.FusionPlan(x)
    plan.add_conv(w, padding=1)
    plan.add_activation("relu")
    plan.compile()
    out = np.full((1, 16, 6, 6), np.nan, np.float32)
    with pytest.raises(conflux.Error, match="input descriptor"):
        plan.execute(np.zeros((1, 8, 7, 6), np.float32), [w, None], out=out)
    with pytest.raises(conflux.Error, match="arguments"):
        plan.execute(x, [w], out=out)
    assert np.isnan(out).all()
    bad_out = np.zeros((1, 16, 6, 5), np.float32)
    with pytest.raises(conflux.Error, match="out has lengths"):
        plan.execute(x, [w, None], out=bad_out)
    assert not bad_out.any()


def test_error_is_a_runtime_error():
    assert issubclass(conflux.Error, RuntimeError)
