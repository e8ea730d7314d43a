#!/usr/bin/python3
"""torch_writer.py - writes what torch.save writes, without torch.

torch.save(obj, "NAME.pt") (PyTorch >= 1.6, the zip format) writes a zip
archive whose entries are all stored (not compressed), each entry's data
64-byte aligned by padding the local header's extra field (id "FB"):

    ARCHIVE/data.pkl       the object, pickled with protocol 2 by a Pickler whose
                           persistent_id turns every tensor storage into the tuple
                           ('storage', torch.<Type>Storage, key, location, numel)
    ARCHIVE/byteorder      "little"
    ARCHIVE/data/KEY       each storage's raw bytes, little-endian; keys are
                           "0", "1", ... in the order the pickler first meets them
    ARCHIVE/version        "3\\n"

ARCHIVE is the file's name without its extension ("ckpt" for ckpt.pt; newer
writers, and torch.save to a buffer, use "archive"). A tensor pickles as
torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
requires_grad, backward_hooks=OrderedDict()); two tensors viewing one storage
(nanoGPT's tied wte/lm_head) name the same key. A state dict is an
OrderedDict whose instance __dict__ holds _metadata, so it pickles as
OrderedDict() + SETITEMS + BUILD({'_metadata': ...}).

Here a fake `torch` and `torch._utils` module provide objects whose pickled
names are exactly torch's, so Python's own pickle module writes the same
opcodes torch's does. Nothing from torch is imported or needed.
"""

import collections
import io
import pickle
import struct
import sys
import types
import zipfile

import numpy as np

_torch = types.ModuleType("torch")
_utils = types.ModuleType("torch._utils")
_torch._utils = _utils


def _rebuild_tensor_v2(*args):  # never called: only its name is pickled
    raise RuntimeError("fake")


_rebuild_tensor_v2.__module__ = "torch._utils"
_utils._rebuild_tensor_v2 = _rebuild_tensor_v2

# storage type name -> (numpy dtype of the raw bytes, bytes per element)
STORAGE_TYPES = {"FloatStorage": ("<f4", 4), "HalfStorage": ("<f2", 2), "BFloat16Storage": ("<u2", 2),
                 "LongStorage": ("<i8", 8), "DoubleStorage": ("<f8", 8)}
for _name in STORAGE_TYPES:
    _cls = type(_name, (), {"__module__": "torch"})
    setattr(_torch, _name, _cls)
sys.modules.setdefault("torch", _torch)
sys.modules.setdefault("torch._utils", _utils)


class Storage:
    """A storage: raw little-endian data of one storage type."""

    def __init__(self, type_name, array):
        np_dtype, _ = STORAGE_TYPES[type_name]
        self.type_name = type_name
        self.data = np.ascontiguousarray(array).astype(np_dtype).tobytes()
        self.numel = int(np.asarray(array).size)


class Tensor:
    """A tensor viewing a storage: shape, stride (elements), offset."""

    def __init__(self, storage, shape, offset=0, stride=None, requires_grad=False):
        self.storage, self.shape, self.offset = storage, tuple(shape), offset
        if stride is None:
            stride, acc = [], 1
            for d in reversed(self.shape):
                stride.insert(0, acc)
                acc *= d
        self.stride = tuple(stride)
        self.requires_grad = requires_grad

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor_v2, (self.storage, self.offset, self.shape, self.stride, self.requires_grad,
                                     collections.OrderedDict()))


def tensor(array, type_name="FloatStorage"):
    """A fresh tensor holding array (BFloat16Storage: array is uint16 bit patterns)."""
    array = np.asarray(array)
    return Tensor(Storage(type_name, array), array.shape)


def state_dict(items, metadata_keys=("",)):
    """An OrderedDict with a _metadata attribute, as Module.state_dict() returns."""
    sd = collections.OrderedDict(items)
    sd._metadata = collections.OrderedDict((k, {"version": 1}) for k in metadata_keys)
    return sd


def pickle_bytes(obj):
    """obj pickled as torch.save pickles: protocol 2, storages as persistent ids.
    Returns (data.pkl bytes, [(key, Storage)] in key order)."""
    keys = {}

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, Storage):
                key = keys.setdefault(id(o), (str(len(keys)), o))[0]
                return ("storage", getattr(_torch, o.type_name), key, "cpu", o.numel)
            return None

    buf = io.BytesIO()
    P(buf, protocol=2).dump(obj)
    return buf.getvalue(), [v for v in keys.values()]


def _aligned(zf, name, data, align=64):
    """Writes one stored entry with its data at a multiple of align."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    at = zf.fp.tell() + 30 + len(name.encode())
    pad = -(at + 4) % align
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)


def torch_save(obj, path, archive=None):
    """Writes obj to path as torch.save does (see the module's docstring)."""
    if archive is None:
        base = path.rsplit("/", 1)[-1]
        archive = base.rsplit(".", 1)[0] if "." in base else base
    pkl, storages = pickle_bytes(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        _aligned(zf, f"{archive}/data.pkl", pkl)
        _aligned(zf, f"{archive}/byteorder", b"little")
        for key, st in sorted(storages, key=lambda ks: int(ks[0])):
            _aligned(zf, f"{archive}/data/{key}", st.data)
        _aligned(zf, f"{archive}/version", b"3\n")
    return pkl
