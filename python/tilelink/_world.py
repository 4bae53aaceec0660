"""Worlds bootstrapped from torch.distributed, and symmetric tensors."""

from __future__ import annotations

import ctypes
import itertools
import threading
import warnings

import torch
import torch.distributed as dist

from . import _capi

_DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}
_worlds: dict[int, "World"] = {}
_ids = itertools.count(1)
_default: "World | None" = None
_lock = threading.Lock()


class World:
    """One process's rank of a tilelink world: its symmetric heap, peers' heaps (CUDA IPC or
    NVSHMEM: ``transport``) and streams. Made by :func:`init`; ``close()`` it (collectively) when
    done, or use it as a context manager: ``with tilelink.init(group) as world: ...``."""

    def __init__(self, group, handle: ctypes.c_void_p, callbacks, rank: int, size: int):
        self.group = group
        self._handle = handle
        self._callbacks = callbacks  # the ctypes callbacks must live as long as the world
        self.rank, self.size = rank, size
        self.id = next(_ids)
        info = self._info()
        self.device = torch.device("cuda", info.device)
        self.sm_count = info.sm_count
        self.max_ranks_per_gpu = info.max_ranks_per_gpu
        self.transport = info.transport.decode()

    def _info(self) -> _capi.WorldInfo:
        info = _capi.WorldInfo()
        self._call("tl_world_query", ctypes.byref(info))
        return info

    @property
    def heap_free(self) -> int:
        """Bytes of symmetric heap still free on this rank."""
        return self._info().heap_free

    def check(self) -> None:
        """Waits for the current CUDA stream, then raises RuntimeError if a device-side wait of an
        op call timed out since the last check — on this rank, or on another rank in the same
        call (every wait of that call then gave up, so its outputs are not valid). Each fault is
        raised once, on every rank; later calls run normally. The next op call raises a fault
        this rank's own waits saw even without a check."""
        self._call("tl_world_check", ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    def _call(self, name: str, *args) -> None:
        if self._handle is None:
            raise RuntimeError("tilelink: this world was closed")
        status = getattr(_capi.lib(), name)(self._handle, *args)
        error = self._callbacks.take_error()
        if status != 0:
            message = _capi.lib().tl_last_error().decode(errors="replace")
            raise RuntimeError(message) from error

    def empty(self, shape, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """A tensor in symmetric memory (collective: same shape and dtype on every rank). Lives as
        long as the world; the heap is a bump allocator, so allocate once and reuse."""
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list, torch.Size)) else (shape,)))
        count = 1
        for s in shape:
            count *= s
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        ptr = ctypes.c_void_p()
        self._call("tl_symmetric_alloc", ctypes.c_size_t(max(nbytes, 1)), ctypes.byref(ptr))
        return _tensor_at(ptr.value, shape, dtype, self)

    def zeros(self, shape, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        t = self.empty(shape, dtype)
        t.zero_()
        return t

    def close(self) -> None:
        """Collective: waits for the world's work, unmaps the peers, frees the heap."""
        global _default
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        with _lock:
            _worlds.pop(self.id, None)
            if _default is self:  # the latest world still open takes over
                _default = list(_worlds.values())[-1] if _worlds else None
        _capi.check(_capi.lib().tl_world_destroy(handle))

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"{self.device}"
        return f"tilelink.World(rank={self.rank}, size={self.size}, {state})"


class _CudaArray:
    """Just enough of __cuda_array_interface__ for torch.as_tensor to wrap heap memory."""

    def __init__(self, ptr: int, shape, typestr: str, owner: World):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}
        self.owner = owner


def _tensor_at(ptr: int, shape, dtype: torch.dtype, world: World) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    # bf16 has no array-interface type string: wrap the bytes as unsigned integers and view them.
    typestr = {1: "|u1", 2: "<u2", 4: "<u4", 8: "<u8"}[size]
    with torch.cuda.device(world.device):
        raw = torch.as_tensor(_CudaArray(ptr, shape, typestr, world), device=world.device)
    return raw.view(dtype)


class _Bootstrap:
    """allgather and barrier over a torch.distributed group, as C callbacks."""

    def __init__(self, group):
        self.group = group
        backend = dist.get_backend(group)
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
        self.size = dist.get_world_size(group)
        self.error: BaseException | None = None
        self.allgather = _capi.ALLGATHER_FN(self._allgather)
        self.barrier = _capi.BARRIER_FN(self._barrier)

    def take_error(self) -> BaseException | None:
        error, self.error = self.error, None
        return error

    def _gather(self, mine: bytes) -> bytes:
        src = torch.frombuffer(bytearray(mine), dtype=torch.uint8).to(self.device)
        out = torch.empty(self.size * len(mine), dtype=torch.uint8, device=self.device)
        dist.all_gather_into_tensor(out, src, group=self.group)
        return out.cpu().numpy().tobytes()

    def _allgather(self, _state, mine, all_, nbytes) -> int:
        try:
            data = self._gather(ctypes.string_at(mine, nbytes))
            ctypes.memmove(all_, data, len(data))
            return 0
        except BaseException as e:  # noqa: BLE001 - reported by the caller of the C function
            self.error = e
            return 1

    def _barrier(self, _state) -> int:
        try:
            self._gather(b"\x01")
            return 0
        except BaseException as e:  # noqa: BLE001
            self.error = e
            return 1


def init(group=None, *, heap_bytes: int = 0, wait_timeout_ms: int = 0, transport: str = "auto") -> World:
    """Makes a tilelink world of the ranks of ``group`` (default: the default process group), one
    rank per process, on this process's current CUDA device. Collective over ``group``: every rank
    of it calls ``init`` with the same arguments. Everything the ranks exchange goes through the
    group (a TP subgroup works); tilelink opens no socket or file of its own (NVSHMEM's own
    bootstrap does, from the unique id the group carries). The ranks must be on one node.

    heap_bytes: symmetric heap per rank (0: $TILELINK_HEAP_MB MiB, else 2 GiB).
    wait_timeout_ms: bound on device-side waits (0: $TILELINK_WAIT_TIMEOUT_MS, else 5000).
    transport: how peers' heaps are mapped: "cuda_ipc", "nvshmem" (heaps from nvshmem_malloc; one
      NVSHMEM world per process), or "auto" ($TILELINK_TRANSPORT, else "cuda_ipc").
    """
    global _default
    if transport not in _capi.TRANSPORTS:
        raise ValueError(f"tilelink.init: transport={transport!r}; expected one of {sorted(_capi.TRANSPORTS)}")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("tilelink.init: torch.distributed is not initialised; call "
                           "torch.distributed.init_process_group first (e.g. under torchrun)")
    if not torch.cuda.is_available():
        raise RuntimeError("tilelink.init: no CUDA device is visible; tilelink runs on Hopper (sm_90) GPUs")
    group = group if group is not None else dist.group.WORLD
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("tilelink.init: this process is not a member of the group it passed")
    device = torch.cuda.current_device()
    boot = _Bootstrap(group)
    options = _capi.WorldOptions(heap_bytes, 0, wait_timeout_ms, _capi.TRANSPORTS[transport])
    handle = ctypes.c_void_p()
    status = _capi.lib().tl_world_create(rank, size, device, boot.allgather, boot.barrier, None,
                                         ctypes.byref(options), ctypes.byref(handle))
    error = boot.take_error()
    if status != 0:
        raise RuntimeError(_capi.lib().tl_last_error().decode(errors="replace")) from error
    world = World(group, handle, boot, rank, size)
    if world.max_ranks_per_gpu > 1:
        warnings.warn(f"tilelink.init: up to {world.max_ranks_per_gpu} ranks of this world share a GPU (this rank is on "
                      f"{world.device}); processes sharing a GPU run one at a time unless MPS is on, and the ops "
                      "then avoid NCCL. Did each process call torch.cuda.set_device(local_rank) first?", stacklevel=2)
    with _lock:
        _worlds[world.id] = world
        _default = world
    return world


def default_world() -> World:
    if _default is None:
        raise RuntimeError("tilelink: no world; call tilelink.init(group) first (ops use the latest world "
                           "still open unless given world=...)")
    return _default


def world_by_id(world_id: int) -> World:
    world = _worlds.get(world_id)
    if world is None:
        raise RuntimeError(f"tilelink: world {world_id} does not exist (closed, or never made by tilelink.init)")
    return world


def dtype_code(dtype: torch.dtype) -> int:
    return _DTYPES[dtype]


def empty(shape, dtype: torch.dtype = torch.bfloat16, world: World | None = None) -> torch.Tensor:
    """``world.empty`` on the given or the latest world."""
    return (world or default_world()).empty(shape, dtype)


def zeros(shape, dtype: torch.dtype = torch.bfloat16, world: World | None = None) -> torch.Tensor:
    return (world or default_world()).zeros(shape, dtype)
