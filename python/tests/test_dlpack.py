"""Arrays from any DLPack producer: the capsule is read in place (no copy), legacy and
versioned capsules, and outputs come back as the producer's kind through __array_namespace__."""

import numpy as np
import pytest

import conflux
from conflux._conflux import dlpack_view
from conftest import rel_l2


class Producer:
    """A foreign array type that offers only DLPack and the array-API namespace (numpy's)."""

    def __init__(self, a):
        self.a = a
        self.dtype = a.dtype  # the array API's attributes, used to allocate outputs
        self.device = "cpu"

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __array_namespace__(self):
        return np


def test_capsule_is_read_in_place():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, 1:, ::2]
    ptr, dtype, shape, strides, device, read_only = dlpack_view(a.__dlpack__())
    assert ptr == a.ctypes.data
    assert dtype == (2, 32, 1) and shape == [2, 2, 2] and strides == [12, 4, 2]
    assert device == (1, 0) and not read_only


def test_versioned_capsule():
    a = np.ones((2, 3), np.float16)
    try:
        cap = a.__dlpack__(max_version=(1, 0))
    except TypeError:
        pytest.skip("numpy without DLPack 1.0")
    ptr, dtype, shape, _, _, _ = dlpack_view(cap)
    assert ptr == a.ctypes.data and dtype == (2, 16, 1) and shape == [2, 3]


def test_not_a_capsule():
    with pytest.raises(conflux.Error, match="DLPack capsule"):
        dlpack_view(object())


def test_conv_through_dlpack_only():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 8, 8), dtype=np.float32)
    w = rng.standard_normal((5, 4, 3, 3), dtype=np.float32)
    y = conflux.conv2d(Producer(x), Producer(w), padding=1, activation="relu")
    ref = conflux.conv2d(x, w, padding=1, activation="relu")
    assert isinstance(y, np.ndarray)
    assert rel_l2(y, ref) == 0.0
