"""dlpack_torch.py LIB -- DLPack between gpureduce's C API and PyTorch, in one process (spec/dlpack_spec.lua).

LIB is a build's libgpureduce.so, loaded with ctypes. Both directions, on cpu tensors and, where torch sees
a GPU and the engine's backend is cuda, on cuda ones:
  - ours to torch: a transposed view of 1..1000 (int32) exported with gr_buffer_to_dlpack, our handles
    freed, handed to torch.from_dlpack as a "dltensor_versioned" capsule made from the address (torch
    before DLPack 1.0 gets a legacy DLManagedTensor made here that forwards to our deleter): the same
    elements and sum; torch's tensor gone, our memory goes too (the engine's live bytes);
  - torch's to ours: t.__dlpack__(max_version=(1, 0)) (or torch.utils.dlpack.to_dlpack before 1.0), the
    capsule's pointer to gr_buffer_from_dlpack (_legacy), the capsule marked used: gr_reduce's sum of a
    float32 tensor and the elements of a transposed int64 one; the torch tensor dropped, we still read it;
    our free runs torch's deleter (on cuda: torch.cuda.memory_allocated falls back).
Prints "dlpack_torch: ok ..." and exits 0, else a reason and exits 1.
"""
import ctypes
import sys

import torch

lib = ctypes.PyDLL(sys.argv[1])     # PyDLL keeps the GIL: torch's deleter may run inside gr_buffer_free
api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# ---- the C API's types (engine/gr.h) ------------------------------------------------------------------

GR_DEVICE, GR_HOST = 0, 1
GR_BACKEND_CUDA = 1


class Value(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64), ("f", ctypes.c_double), ("b", ctypes.c_int)]


class Scalar(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("v", Value)]


class Result(ctypes.Structure):
    _fields_ = [("count", ctypes.c_int), ("value", Scalar * 2)]


class PoolStats(ctypes.Structure):     # the fields read here, then room for any that follow
    _fields_ = [("device_allocs", ctypes.c_size_t), ("host_allocs", ctypes.c_size_t), ("slots", ctypes.c_int),
                ("live_device_bytes", ctypes.c_size_t), ("live_pinned_bytes", ctypes.c_size_t),
                ("rest", ctypes.c_char * 1024)]


P = ctypes.c_void_p
for name, res, args in [
        ("gr_context_create", ctypes.c_int, [ctypes.POINTER(P)]), ("gr_context_destroy", None, [P]),
        ("gr_context_backend", ctypes.c_int, [P]), ("gr_errmsg", ctypes.c_char_p, [P]),
        ("gr_dtype_from_name", ctypes.c_int, [ctypes.c_char_p]), ("gr_op_from_name", ctypes.c_int, [ctypes.c_char_p]),
        ("gr_buffer_new", ctypes.c_int, [P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.POINTER(P)]),
        ("gr_buffer_free", None, [P, P]), ("gr_buffer_iota", ctypes.c_int, [P, P, Scalar, Scalar]),
        ("gr_buffer_view", ctypes.c_int, [P, P, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(P)]),
        ("gr_buffer_permute", ctypes.c_int, [P, P, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(P)]),
        ("gr_buffer_read", ctypes.c_int, [P, P, ctypes.c_size_t, P, ctypes.c_size_t]),
        ("gr_options_init", None, [P, ctypes.c_int]), ("gr_reduce", ctypes.c_int, [P, P, P, ctypes.POINTER(Result)]),
        ("gr_pool_stats_get", None, [P, ctypes.POINTER(PoolStats)]),
        ("gr_buffer_to_dlpack", ctypes.c_int, [P, P, ctypes.POINTER(P)]),
        ("gr_buffer_from_dlpack", ctypes.c_int, [P, P, ctypes.POINTER(P)]),
        ("gr_buffer_from_dlpack_legacy", ctypes.c_int, [P, P, ctypes.POINTER(P)])]:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = res, args


# ---- DLPack's structures (engine/core/dlpack.h), for the legacy adapter ----------------------------------

class DLTensor(ctypes.Structure):
    _fields_ = [("data", P), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", P), ("strides", P), ("byte_offset", ctypes.c_uint64)]


VersionedDeleter = ctypes.CFUNCTYPE(None, P)


class Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", P),
                ("deleter", VersionedDeleter), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


LegacyDeleter = ctypes.CFUNCTYPE(None, P)


class Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", P), ("deleter", LegacyDeleter)]


keep = {}       # what a legacy adapter needs until torch calls its deleter


def legacy_capsule(addr):
    """A pre-1.0 DLManagedTensor over our versioned one, for a torch that reads only those."""
    v = Versioned.from_address(addr)
    adapter = Legacy(v.dl_tensor, None)

    def release(_self):
        Versioned.from_address(addr).deleter(addr)
        keep.pop(key)

    cb = LegacyDeleter(release)
    adapter.deleter = cb
    key = ctypes.addressof(adapter)
    keep[key] = (adapter, cb)
    return api.PyCapsule_New(key, b"dltensor", None)


CAPSULE_NAME = b"dltensor_versioned"    # PyCapsule_New keeps the pointer: the bytes must live on


def fail(why):
    print("dlpack_torch: FAILED: " + why)
    sys.exit(1)


def check(st, what):
    if st != 0:
        fail("%s: %s" % (what, lib.gr_errmsg(ctx).decode()))


def live():
    s = PoolStats()
    lib.gr_pool_stats_get(ctx, ctypes.byref(s))
    return s.live_device_bytes + s.live_pinned_bytes


def ours_to_torch(device, versioned):
    before = live()
    b, v, t, p = P(), P(), P(), P()
    check(lib.gr_buffer_new(ctx, 1000, lib.gr_dtype_from_name(b"int32"), GR_DEVICE, ctypes.byref(b)), "new")
    one = Scalar(0, Value(i=1))
    check(lib.gr_buffer_iota(ctx, b, one, one), "iota")
    shape = (ctypes.c_size_t * 2)(25, 40)
    perm = (ctypes.c_int * 2)(1, 0)
    check(lib.gr_buffer_view(ctx, b, 2, shape, ctypes.byref(v)), "view")
    check(lib.gr_buffer_permute(ctx, v, perm, ctypes.byref(t)), "permute")
    check(lib.gr_buffer_to_dlpack(ctx, t, ctypes.byref(p)), "export")
    for h in (t, v, b):
        lib.gr_buffer_free(ctx, h)
    cap = api.PyCapsule_New(p.value, CAPSULE_NAME, None) if versioned else legacy_capsule(p.value)
    x = torch.from_dlpack(cap)
    want = torch.arange(1, 1001, dtype=torch.int32).reshape(25, 40).T
    if x.device.type != device or tuple(x.shape) != (40, 25) or x.stride() != (1, 40):
        fail("torch saw %s %s strides %s" % (x.device, tuple(x.shape), x.stride()))
    if not torch.equal(x.cpu(), want) or int(x.sum()) != 500500:
        fail("torch read other elements (sum %d)" % int(x.sum()))
    if live() != before + 4000:
        fail("the export did not hold its memory")
    del x, cap
    if live() != before:
        fail("torch's release did not give our memory back")


def torch_to_ours(device, versioned):
    torch.manual_seed(1)
    f = torch.rand(4099, dtype=torch.float32, device=device)
    g = torch.arange(60, dtype=torch.int64, device=device).reshape(6, 10).T     # strided
    if device == "cuda":
        torch.cuda.synchronize()
    sums = []
    for x in (f, g):
        if versioned:
            cap, name = x.__dlpack__(max_version=(1, 0)), CAPSULE_NAME
        else:
            cap, name = torch.utils.dlpack.to_dlpack(x), b"dltensor"
        addr = api.PyCapsule_GetPointer(cap, name)
        b = P()
        entry = lib.gr_buffer_from_dlpack if versioned else lib.gr_buffer_from_dlpack_legacy
        check(entry(ctx, addr, ctypes.byref(b)), "import of torch's %s tensor" % device)
        api.PyCapsule_SetName(cap, b"used_" + name)      # ours now: the capsule must not release it
        sums.append(b)
    fb, gb = sums
    expect_f = float(f.double().sum())
    expect_g = g.cpu().contiguous().flatten().tolist()
    memory = torch.cuda.memory_allocated() if device == "cuda" else None
    del f, g
    if device == "cuda" and torch.cuda.memory_allocated() != memory:
        fail("torch freed memory we hold")
    opts = (ctypes.c_uint64 * 1024)()
    lib.gr_options_init(opts, lib.gr_op_from_name(b"sum"))
    r = Result()
    check(lib.gr_reduce(ctx, fb, opts, ctypes.byref(r)), "sum of torch's tensor")
    if abs(r.value[0].v.f - expect_f) > 1e-4 * abs(expect_f):
        fail("our sum %r, torch's %r" % (r.value[0].v.f, expect_f))
    got = (ctypes.c_int64 * 60)()
    check(lib.gr_buffer_read(ctx, gb, 0, got, 60), "read of torch's transposed tensor")
    if list(got) != expect_g:
        fail("the transposed tensor read %s" % list(got)[:12])
    lib.gr_buffer_free(ctx, fb)
    lib.gr_buffer_free(ctx, gb)
    if device == "cuda" and torch.cuda.memory_allocated() >= memory:
        fail("our free did not release torch's memory")


ctx = P()
if lib.gr_context_create(ctypes.byref(ctx)) != 0:
    fail("no context")
try:                # DLPack 1.0 came to torch with __dlpack__'s max_version (torch.from_dlpack reads both)
    torch.empty(1).__dlpack__(max_version=(1, 0))
    versioned = True
except TypeError:
    versioned = False
devices = ["cpu"]
if torch.cuda.is_available() and lib.gr_context_backend(ctx) == GR_BACKEND_CUDA:
    devices.append("cuda")
for device in devices:
    if device == "cpu" and lib.gr_context_backend(ctx) == GR_BACKEND_CUDA:
        # on the cuda backend a device buffer is device memory: torch's cpu side meets our host buffers only
        # through torch_to_ours (kDLCPU imports as a host buffer)
        torch_to_ours(device, versioned)
    else:
        ours_to_torch(device, versioned)
        torch_to_ours(device, versioned)
    print("dlpack_torch: %s: ok" % device)
lib.gr_context_destroy(ctx)
print("dlpack_torch: ok (torch %s, %s capsules)" % (torch.__version__, "versioned" if versioned else "legacy"))
