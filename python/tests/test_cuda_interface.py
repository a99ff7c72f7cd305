"""Reading __cuda_array_interface__, with fake objects (no GPU needed)."""

import re

import numpy as np
import pytest

import markerscope as ms
from markerscope._cuda import describe_cuda_array, is_cuda_array


class Fake:
    def __init__(self, **cai):
        base = {"shape": (4, 6), "typestr": "|u1", "data": (0x7000_0000, False), "version": 3,
                "strides": None, "stream": 1}
        base.update(cai)
        self.__cuda_array_interface__ = base


class TorchCpuLike:
    @property
    def __cuda_array_interface__(self):
        raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor")


def test_contiguous_uint8_and_bool():
    a = describe_cuda_array(Fake(), "image")
    assert (a.ptr, a.width, a.height, a.row_pitch, a.contiguous_rows, a.stream) == (0x7000_0000, 6, 4, 6, True, 1)
    assert describe_cuda_array(Fake(typestr="|b1"), "image").width == 6


def test_padded_rows_and_strided_columns():
    padded = describe_cuda_array(Fake(strides=(64, 1)), "image")
    assert padded.row_pitch == 64 and padded.contiguous_rows
    strided = describe_cuda_array(Fake(strides=(12, 2)), "image")
    assert not strided.contiguous_rows
    flipped = describe_cuda_array(Fake(strides=(-6, 1)), "image")
    assert not flipped.contiguous_rows
    one_row = describe_cuda_array(Fake(shape=(1, 6), strides=(1, 1)), "image")
    assert one_row.contiguous_rows and one_row.row_pitch == 6


@pytest.mark.parametrize("cai, error, match", [
    ({"typestr": "<f4"}, TypeError, "image: expected a uint8 or bool array, got typestr '<f4'"),
    ({"typestr": "<i4"}, TypeError, "uint8 or bool"),
    ({"shape": (4, 6, 3)}, ValueError, r"image: expected a 2-D array, got shape \(4, 6, 3\)"),
    ({"shape": (0, 6)}, ValueError, "image: the image is empty"),
    ({"mask": object()}, ValueError, "masked"),
    ({"data": (0, False)}, ValueError, "null device pointer"),
    ({"data": None}, ValueError, "must be \\(pointer, read_only\\)"),
    ({"stream": 0}, ValueError, "stream"),
])
def test_bad_interfaces_name_the_argument(cai, error, match):
    with pytest.raises(error, match=match):
        describe_cuda_array(Fake(**cai), "image")


def test_what_counts_as_device_memory():
    assert is_cuda_array(Fake())
    assert not is_cuda_array(np.zeros((2, 2), np.uint8))
    assert not is_cuda_array(TorchCpuLike())


def test_device_input_refuses_other_backends_and_algorithms():
    with pytest.raises(ValueError, match="backend: a CUDA array is labeled on the GPU"):
        ms.connected_components_with_stats(Fake(), backend="cpu")
    usable = "use one of flsl, flsl_otf, flsl_cd, flsl_cdb"
    for name in ("lsl", "ha4", "HA8", "bke"):
        with pytest.raises(ValueError, match=f"algorithm: '{name.lower()}' cannot label CUDA arrays; {usable}"):
            ms.connected_components_with_stats(Fake(), algorithm=name)
        with pytest.raises(ValueError, match="cannot label CUDA arrays"):
            ms.component_stats(Fake(), algorithm=name)
    with pytest.raises(ValueError, match="nope"):
        ms.component_stats(Fake(), algorithm="nope")
    with pytest.raises(TypeError, match="algorithm: expected a name"):
        ms.component_stats(Fake(), algorithm=3)


def test_device_input_grey_must_be_a_matching_cuda_image():
    with pytest.raises(TypeError, match="grey: a CUDA image needs a CUDA grey image"):
        ms.component_stats(Fake(), grey=np.zeros((4, 6), np.uint8), level=3)
    with pytest.raises(TypeError, match=re.escape("grey: expected a uint8 array, got typestr '|b1'")):
        ms.component_stats(Fake(), grey=Fake(typestr="|b1"), level=3)
    with pytest.raises(ValueError, match=r"grey: shape \(4, 5\) differs from the image's \(4, 6\)"):
        ms.component_stats(Fake(), grey=Fake(shape=(4, 5)), level=3)
    with pytest.raises(ValueError, match="grey and level"):
        ms.component_stats(Fake(), grey=Fake())


def test_the_registry_says_which_algorithms_take_cuda_arrays():
    takes = sorted(a["name"] for a in ms.algorithms() if a["device_input"])
    assert takes == ["flsl", "flsl_cd", "flsl_cdb", "flsl_otf"]
    assert all(a["backend"] == "cuda" for a in ms.algorithms() if a["device_input"])


def test_device_input_without_a_gpu_says_why():
    if ms.devices()[0]["usable"]:
        pytest.skip("a GPU is usable here")
    with pytest.raises(RuntimeError, match="CUDA backend unavailable"):
        ms.component_stats(Fake())
    for name in ("flsl", "flsl_otf", "flsl_cd", "flsl_cdb"):
        with pytest.raises(RuntimeError, match="CUDA backend unavailable"):
            ms.connected_components_with_stats(Fake(), 4, algorithm=name)
    with pytest.raises(RuntimeError, match="CUDA backend unavailable"):
        ms.component_stats(Fake(), grey=Fake(), level=3)


def test_result_arrays_come_in_one_call_with_their_pointers(monkeypatch):
    """The allocator the device labeling calls (once before the labeling, once after) returns an
    (array, pointer) pair per kind, of the input's library, in the shapes and dtypes asked."""
    import sys
    import types

    from markerscope import _allocator

    made = []

    class Array:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, np.dtype(dtype)
            self.data = types.SimpleNamespace(ptr=0x1000 * (len(made) + 1))
            made.append(self)

    class Device:
        def __init__(self, device):
            self.device = device

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    fake = types.ModuleType("cupy")
    fake.empty = lambda shape, dtype: Array(shape, dtype)
    entered = []
    Device.__enter__ = lambda self: entered.append(self.device) or self
    current = [0]
    fake.cuda = types.SimpleNamespace(Device=Device, runtime=types.SimpleNamespace(getDevice=lambda: current[0]))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    allocate = _allocator(Fake(), describe_cuda_array(Fake(shape=(4, 6)), "image"))
    pairs = allocate(("labels",), 0)
    assert [(a.shape, a.dtype, p) for a, p in pairs] == [((4, 6), np.int32, 0x1000)]
    pairs = allocate(("stats", "centroids", "sums", "subpixel"), 7)
    assert [(a.shape, a.dtype.name) for a, _ in pairs] == [((7, 5), "int32"), ((7, 2), "float64"),
                                                          ((7, 2), "int64"), ((7, 2), "float64")]
    assert [p for _, p in pairs] == [a.data.ptr for a in made[1:]]
    # The array's device is current: no device switch; another device is: allocated there.
    assert entered == []
    current[0] = 1
    allocate(("stats",), 2)
    assert entered == [0]
