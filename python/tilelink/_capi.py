"""ctypes bindings of libtilelink_c.so (include/tilelink/c_api.h).

The library is found, in order: $TILELINK_LIBRARY (a path to the .so), beside this module (where
`pip install .` puts it), or in a build tree's lib/ folder next to the package sources.
It is loaded on first use, so `import tilelink` works on machines without a GPU (fake tensors,
torch.compile tracing, argument checks).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

API_VERSION = 6

BF16, FP16 = 0, 1
PATHS = {"auto": 0, "fused": 1, "decomposed": 2}
TRANSPORTS = {"auto": 0, "cuda_ipc": 1, "nvshmem": 2}

ALLGATHER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
BARRIER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class WorldOptions(ctypes.Structure):
    _fields_ = [("heap_bytes", ctypes.c_size_t), ("signal_slots", ctypes.c_size_t),
                ("wait_timeout_ms", ctypes.c_uint64), ("transport", ctypes.c_int)]


class WorldInfo(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("size", ctypes.c_int), ("device", ctypes.c_int),
                ("sm_count", ctypes.c_int), ("max_ranks_per_gpu", ctypes.c_int),
                ("heap_bytes", ctypes.c_size_t), ("heap_free", ctypes.c_size_t),
                ("transport", ctypes.c_char * 16)]


_lib: ctypes.CDLL | None = None


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    found = []
    if os.environ.get("TILELINK_LIBRARY"):
        found.append(Path(os.environ["TILELINK_LIBRARY"]))
    found.append(here / "libtilelink_c.so")
    build = Path(os.environ.get("TILELINK_BUILD_DIR", here.parents[1] / "build"))
    found.append(build / "lib" / "libtilelink_c.so")
    return found


def _declare(lib: ctypes.CDLL) -> None:
    p, i, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
    lib.tl_api_version.restype = i
    lib.tl_last_error.restype = ctypes.c_char_p
    lib.tl_world_create.argtypes = [i, i, i, ALLGATHER_FN, BARRIER_FN, p, ctypes.POINTER(WorldOptions),
                                    ctypes.POINTER(p)]
    lib.tl_world_destroy.argtypes = [p]
    lib.tl_world_query.argtypes = [p, ctypes.POINTER(WorldInfo)]
    lib.tl_world_check.argtypes = [p, p]
    lib.tl_symmetric_alloc.argtypes = [p, sz, ctypes.POINTER(p)]
    lib.tl_peer_pointer.argtypes = [p, p, i, ctypes.POINTER(p)]
    lib.tl_ag_gemm.argtypes = [p, i, p, p, p, i64, i64, i64, p, i, p]
    lib.tl_gemm_rs.argtypes = [p, i, p, p, p, i64, i64, i64, i, p]
    lib.tl_gemm_ar.argtypes = [p, i, p, p, p, i64, i64, i64, i, p]
    lib.tl_allgather_ll.argtypes = [p, p, p, i64, p]
    lib.tl_flash_decode.argtypes = [p, i, p, p, p, p, i64, i64, i64, i64, i64, ctypes.c_float, p]
    i32 = ctypes.c_int32
    lib.tl_ag_moe.argtypes = [p, i, p, p, p, p, i64, i64, i64, i32, i32, p, i, p]
    lib.tl_moe_rs.argtypes = [p, i, p, p, p, p, p, i64, i64, i64, i32, i32, p, i, p]
    lib.tl_grouped_gemm.argtypes = [i, p, p, p, i64, i64, i32, p, i64, p]
    lib.tl_sp_attention.argtypes = [p, i, p, p, p, p, p, i64, i64, i64, i64, i64, i, i, ctypes.c_float, i, p]
    lib.tl_attention_forward.argtypes = [i, p, p, p, p, p, i64, i64, i64, i64, i64, i64, p, i, i64, ctypes.c_float, p]
    lib.tl_gemm.argtypes = [i, p, p, p, i64, i64, i64, i64, i64, i64, p]
    lib.tl_gemm_set_tuning.argtypes = [i]
    lib.tl_gemm_tuning.argtypes = [ctypes.POINTER(i)]
    lib.tl_gemm_load_tuned_plans.argtypes = [ctypes.c_char_p, ctypes.POINTER(sz)]
    lib.tl_gemm_save_tuned_plans.argtypes = [ctypes.c_char_p, ctypes.POINTER(sz)]
    lib.tl_gemm_clear_tuned_plans.argtypes = []
    for name in ("tl_world_create", "tl_world_destroy", "tl_world_query", "tl_world_check", "tl_symmetric_alloc",
                 "tl_peer_pointer", "tl_ag_gemm", "tl_gemm_rs", "tl_gemm_ar", "tl_allgather_ll",
                 "tl_flash_decode", "tl_ag_moe", "tl_moe_rs", "tl_grouped_gemm",
                 "tl_attention_forward", "tl_sp_attention", "tl_gemm", "tl_gemm_set_tuning", "tl_gemm_tuning",
                 "tl_gemm_load_tuned_plans", "tl_gemm_save_tuned_plans", "tl_gemm_clear_tuned_plans"):
        getattr(lib, name).restype = i


def lib() -> ctypes.CDLL:
    """The loaded library (loads it on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    # torch first: the library resolves libcudart, libcublas and libnccl to the ones PyTorch loaded.
    import torch  # noqa: F401

    tried = []
    for path in _candidates():
        if path.is_file():
            try:
                loaded = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
            except OSError as e:
                raise RuntimeError(f"tilelink: cannot load {path}: {e} (tilelink needs the NVIDIA driver and a "
                                   "Hopper GPU; fake tensors and torch.compile tracing work without them)") from e
            _declare(loaded)
            version = loaded.tl_api_version()
            if version != API_VERSION:
                raise RuntimeError(f"tilelink: {path} implements C API version {version}, this package needs "
                                   f"{API_VERSION}: rebuild or reinstall tilelink")
            _lib = loaded
            return _lib
        tried.append(str(path))
    raise RuntimeError("tilelink: libtilelink_c.so not found (tried " + ", ".join(tried) + "); install the package "
                       "with `pip install .` from the repository, or set TILELINK_LIBRARY to the library's path")


def check(status: int) -> None:
    """Raises the library's last error unless `status` is TL_OK."""
    if status != 0:
        raise RuntimeError(lib().tl_last_error().decode(errors="replace"))
