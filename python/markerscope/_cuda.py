"""Reading ``__cuda_array_interface__`` (CuPy arrays, PyTorch CUDA tensors, Numba arrays):
the device pointer, shape, row pitch and stream of a 2-D uint8 / bool mask."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

# typestr of the dtypes a mask may have: uint8 and bool (one byte each); a grey image: uint8.
_MASK_TYPES = ("|u1", "|b1", "<u1", ">u1")
_GREY_TYPES = ("|u1", "<u1", ">u1")


class CudaArray(NamedTuple):
    ptr: int
    width: int
    height: int
    row_pitch: int
    #: False when columns are not adjacent bytes (a transposed or strided view).
    contiguous_rows: bool
    #: The stream the array's producer used (None: unknown; 1, 2: the default streams).
    stream: Optional[int]
    device: int


def cuda_interface(obj: Any) -> Any:
    """``obj.__cuda_array_interface__`` for objects that describe device memory that way, else
    None (a PyTorch CPU tensor's attribute raises, so it counts as host memory). Read once per
    call: CuPy builds the dict on every read."""
    try:
        return getattr(obj, "__cuda_array_interface__", None)
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None


def is_cuda_array(obj: Any) -> bool:
    """True for objects that describe device memory through ``__cuda_array_interface__``."""
    return cuda_interface(obj) is not None


def describe_cuda_array(obj: Any, name: str, grey: bool = False, cai: Any = None) -> CudaArray:
    """Checks a CUDA array interface (version 0 to 3) and returns what the labeler needs;
    a wrong dtype is a TypeError and a wrong shape, mask or pointer a ValueError naming
    ``name``. ``grey``: a grey image (uint8 only) rather than a mask. ``cai``: the interface
    when already read (``cuda_interface``)."""
    if cai is None:
        cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise TypeError(f"{name}: __cuda_array_interface__ is not a dict")
    typestr = cai.get("typestr")
    if typestr not in (_GREY_TYPES if grey else _MASK_TYPES):
        raise TypeError(f"{name}: expected a {'uint8' if grey else 'uint8 or bool'} array, got typestr {typestr!r}")
    shape = tuple(cai.get("shape", ()))
    if len(shape) != 2:
        raise ValueError(f"{name}: expected a 2-D array, got shape {shape}")
    height, width = (int(v) for v in shape)
    if height < 1 or width < 1:
        raise ValueError(f"{name}: the image is empty (shape {shape})")
    if cai.get("mask") is not None:
        raise ValueError(f"{name}: masked CUDA arrays are not supported")
    data = cai.get("data")
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], int)):
        raise ValueError(f"{name}: __cuda_array_interface__['data'] must be (pointer, read_only)")
    ptr = data[0]
    if ptr == 0:
        raise ValueError(f"{name}: null device pointer")
    strides = cai.get("strides")
    if strides is None:
        row_pitch, contiguous_rows = width, True
    else:
        row_stride, col_stride = (int(v) for v in strides)
        contiguous_rows = col_stride == 1 and row_stride >= width
        row_pitch = row_stride if contiguous_rows else width
        if height == 1 and col_stride == 1:
            row_pitch, contiguous_rows = width, True
    stream = cai.get("stream")
    if stream is not None and (not isinstance(stream, int) or stream == 0):
        raise ValueError(f"{name}: __cuda_array_interface__['stream'] must be None or a non-zero integer, got {stream!r}")
    return CudaArray(ptr, width, height, row_pitch, contiguous_rows, stream, _device_of(obj))


def _device_of(obj: Any) -> int:
    device = getattr(obj, "device", None)
    for attr in ("id", "index"):
        value = getattr(device, attr, None)
        if isinstance(value, int):
            return value
    return 0
