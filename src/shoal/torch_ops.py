"""``envs.torch()``: PyTorch custom ops that step a shoal vector env into preallocated tensors.

The ops are registered once with :mod:`torch.library`, with fake implementations, so a loop calling them compiles
with ``torch.compile(fullgraph=True)``. ``envs.torch()`` returns a handle (an int naming the env) and functions
that call them:

* ``send(handle, actions, offsets=None, gamma=1.0)``: start a step of the batch the caller holds; it returns at once
  when every group steps in a worker (``inline=False`` or asynchronous batches).
  With ``offsets`` (``batch + 1`` int64 values), ``actions`` are flat action sequences: env ``j`` of the batch runs
  ``actions[offsets[j]:offsets[j + 1]]``, discounted by ``gamma``.
* ``recv(handle)``: wait for it; ``(obs, reward, terminated, truncated, steps_taken)``.
* ``step(handle, actions, offsets=None, gamma=1.0)``: both.
* ``get_last_info(handle)``: the info arrays of the last ``recv`` as a dict of tensors (``env_id`` and the engine's
  arrays, e.g. Atari's lives). Other infos (``final_obs``, an env's own entries) are the numpy path's: use the
  vector env's ``step``/``recv`` where a program needs them.
* ``unregister(handle)``: free the tensors; the handle is refused afterwards.

**Order under compilation.** The ops act on hidden state (the env), which a compiler cannot see. So each env has a
one-element *token* tensor that every op declares it mutates: that chains ``send``, ``recv`` and ``get_last_info``
calls in program order through real data dependencies (inductor may otherwise move a ``recv`` before its ``send``,
and in torch 2.13 it does not keep registered effects in order for ops with several outputs).

**Returned tensors are never overwritten while anything holds them.** A tensor counts as held while Python
references it or a view of it (reference counts and storage use counts above the pool's own); a compiled graph,
which may schedule a read of step ``k``'s observation after later ``recv`` calls, holds what it will read.

* Observations on CPU: no copy beyond the one into shared memory. The shared buffers have two observation slots to
  hand out (:mod:`shoal.vector.buffers`); ``send`` aims the step at a slot nothing holds, the envs write their
  observations there, and ``recv`` returns that slot as a tensor (a view of its rows in asynchronous mode). A loop
  that keeps the previous observation while it steps runs on the two slots and copies nothing. When both are held
  (or an asynchronous batch straddles slots), the step goes to the numpy path's slot and ``recv`` copies the batch
  once into a set of tensors like the other outputs.
* Observations for a CUDA ``device``: copied to the device straight from their slot, without blocking. The first
  CUDA handle of a vector env page-locks its observation block (``cudaHostRegister``), so the copy engine reads the
  shared buffers directly, with no staging copy on the host; ``send`` aims the next step at a slot whose copy has
  finished, so the envs step into one slot while the device still reads the other. The numpy path's slot, or a batch
  that is not one block of one slot, goes through a pinned host set as below (also where registering fails).
* Everything else (rewards, flags, ``steps_taken``, infos): written into a set of tensors allocated once and reused
  when nothing holds it; only when every set is held is one more allocated, so a loop that drops the previous step's
  tensors allocates nothing. With a CUDA ``device`` a set is pinned host memory copied to a device set without
  blocking; the info arrays only when ``get_last_info`` asks for them (each copy launched costs the calling process
  ~5-15 us, and Atari has six info arrays: most loops never read them).

dtypes are the numpy path's (float64 rewards, bool flags, int32 ``steps_taken``).
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from shoal.errors import ClosedError, ConfigError, NoAsyncCallError

_HANDLES: dict[int, TorchEnv] = {}  # the registered envs, by handle
_TOKENS: dict[int, torch.Tensor] = {}  # each handle's token (see "Order under compilation")
_INFO_NAMES: dict[int, tuple[str, ...]] = {}  # the names get_last_info returns, by handle
_NEXT_HANDLE = itertools.count(1)


class OutputSet:
    """One set of output tensors, each with its own storage (the outputs of one op call may not alias each other).

    ``arrays`` are numpy views of the host tensors (numpy's copies cost less per call than torch's); with a CUDA
    device, ``tensors`` live there and are filled from the pinned host ones without blocking.
    """

    def __init__(self, shapes: dict[str, tuple[tuple[int, ...], np.dtype]], device: torch.device) -> None:
        pin = device.type == "cuda"
        host = {
            name: torch.from_numpy(np.empty(0, dtype)).new_empty(shape, pin_memory=pin)
            for name, (shape, dtype) in shapes.items()
        }
        self.arrays = {name: t.numpy() for name, t in host.items()}
        self.host = host
        self.tensors = host if not pin else {name: torch.empty_like(t, device=device) for name, t in host.items()}
        self.outputs = tuple(self.tensors[name] for name in _OUTPUTS)
        self.copied = torch.cuda.Event() if pin else None  # the host -> device copies of the last fill are done
        self.infos_copied = not pin  # the device tensors of the info arrays hold the last fill's (on the CPU: always)
        self._storages = [t.untyped_storage() for t in self.tensors.values()]
        self._free_uses = self._uses()
        self._free_refs = self._refs()

    def free(self) -> bool:
        """Whether nothing outside this set holds its tensors, or views of them."""
        return self._refs() == self._free_refs and self._uses() == self._free_uses

    def _refs(self) -> list[int]:
        return [sys.getrefcount(t) for t in self.tensors.values()]

    def _uses(self) -> list[int]:
        return [_use_count(s) for s in self._storages]


def _use_count(storage: torch.UntypedStorage) -> int:
    return torch._C._storage_Use_Count(storage._cdata)


_OUTPUTS = ("obs", "reward", "terminated", "truncated", "steps_taken")


class SharedSlots:
    """The observation slots of a vector env's shared buffers that the ops hand out as tensors (slots 1 and up), or
    copy to a CUDA device from."""

    def __init__(self, envs: Any) -> None:
        self.buffers = envs._buffers
        flat = envs._obs_layout.flat if envs.flatten else (lambda a: a)
        count = len(self.buffers.obs) // envs.num_envs
        self.tensors = {k: torch.from_numpy(flat(self.buffers.slot(k))) for k in range(1, count)}
        self._storages = {k: t.untyped_storage() for k, t in self.tensors.items()}
        self._free = {k: (sys.getrefcount(t), _use_count(self._storages[k])) for k, t in self.tensors.items()}
        self.reads: dict[int, torch.cuda.Event] = {}  # per slot: done when the last device copy from it is
        self.pinned: int | None = None  # the observation block's address while it is registered with CUDA
        self.buffers.slots_on[0] = True

    def free(self) -> int:
        """A slot nothing holds and no device copy reads (0, the numpy path's slot, when there is none)."""
        for k, tensor in self.tensors.items():
            if (sys.getrefcount(tensor), _use_count(self._storages[k])) == self._free[k] and self._read(k):
                return k
        return 0

    def _read(self, k: int) -> bool:
        event = self.reads.get(k)
        return event is None or event.query()

    def pin(self) -> bool:
        """Register the observation block with CUDA (page-locked), so that copies to a device read it directly;
        whether it is."""
        if self.pinned is None:
            obs = self.buffers.obs
            if int(torch.cuda.cudart().cudaHostRegister(obs.ctypes.data, obs.nbytes, 0)) == 0:  # cudaSuccess
                self.pinned = obs.ctypes.data
        return self.pinned is not None

    def copy(self, k: int, source: torch.Tensor, target: torch.Tensor) -> None:
        """Copy rows ``source`` of slot ``k`` (pinned) to the device tensor ``target`` without blocking; ``k`` is not
        handed out to a step until the copy is done."""
        target.copy_(source, non_blocking=True)
        event = self.reads.get(k) or self.reads.setdefault(k, torch.cuda.Event())
        event.record()

    def unpin(self) -> None:
        """Wait for the copies in flight and unregister the block (the vector env is about to unmap it)."""
        for event in self.reads.values():
            event.synchronize()
        if self.pinned is not None:
            torch.cuda.cudart().cudaHostUnregister(self.pinned)
            self.pinned = None

    def batch(self, rows: Any) -> tuple[int, torch.Tensor | None]:
        """The received batch at ``rows``: its slot and a tensor over it, or ``(0, None)`` when it is not one block of
        one slot."""
        if not isinstance(rows, slice):
            return 0, None
        k = self.buffers.slot_of(rows)
        if not k:  # the numpy path's slot, or several
            return 0, None
        tensor = self.tensors[k]
        return k, tensor if rows == slice(None) else tensor[rows]


class TorchEnv:
    """A vector env's output tensors, behind one handle of the ops.

    Args:
        envs: a shoal vector env with Box observations (or built with ``flatten=True``).
        device: where the returned tensors live.
    """

    def __init__(self, envs: Any, device: str | torch.device = "cpu") -> None:
        if not envs.flatten and not isinstance(envs.single_observation_space, spaces.Box):
            raise ConfigError(
                f"envs.torch() needs array observations; this env's are {envs.single_observation_space}: build it "
                f"with flatten=True to get them as one flat array"
            )
        self.envs = envs
        self.device = torch.device(device)
        b = envs._buffers
        self._src = {  # where each output is read from: the vector env's buffers
            "obs": self._flat(b.obs),  # for its shape: recv reads observations from their slot
            "reward": b.rewards,
            "terminated": b.terminations,
            "truncated": b.truncations,
            "steps_taken": b.steps_taken,
            **b.extras,
        }
        self.info_names = ("env_id", *b.extras)
        self._all_ids = np.arange(envs.num_envs)
        self._shapes = {name: ((envs.batch_size, *a.shape[1:]), a.dtype) for name, a in self._src.items()}
        self._shapes["env_id"] = ((envs.batch_size,), np.dtype(np.int64))
        self.pool = [self._new_set() for _ in range(2)]
        self._last: OutputSet | None = None
        # One set of slots per vector env, so that every handle sees what the others hold; a CUDA handle uses them
        # only where the block could be registered (else it copies through its pinned sets).
        envs._torch_slots = envs._torch_slots or SharedSlots(envs)
        self.slots = envs._torch_slots if self.device.type == "cpu" or envs._torch_slots.pin() else None
        self.handle = next(_NEXT_HANDLE)

    def _new_set(self) -> OutputSet:
        outputs = OutputSet(self._shapes, self.device)
        outputs.arrays["env_id"][:] = np.arange(self.envs.batch_size)  # stays so in synchronous mode
        return outputs

    # -- the work behind the ops -------------------------------------------------------------------------------------

    def send(self, actions: torch.Tensor, offsets: torch.Tensor | None, gamma: float) -> None:
        # one thread at a time, as in the vector env's own calls (shoal.vector.state)
        self.envs._guard.run(self._send, actions, offsets, gamma)

    def _send(self, actions: torch.Tensor, offsets: torch.Tensor | None, gamma: float) -> None:
        envs = self.envs
        envs._write_slot = self.slots.free() if self.slots is not None else 0
        try:
            if offsets is None:
                envs.send(_numpy(actions))
            else:
                envs.send_sequences(_numpy(actions), _numpy(offsets), gamma)
        finally:
            envs._write_slot = 0

    def recv(self) -> tuple[torch.Tensor, ...]:
        return self.envs._guard.run(self._collect)  # (the step's results are read from the vector env's buffers)

    def step(self, actions: torch.Tensor, offsets: torch.Tensor | None, gamma: float) -> tuple[torch.Tensor, ...]:
        return self.envs._guard.run(self._step, actions, offsets, gamma)  # one call, as the vector env's own step

    def _step(self, actions: torch.Tensor, offsets: torch.Tensor | None, gamma: float) -> tuple[torch.Tensor, ...]:
        self._send(actions, offsets, gamma)
        return self._collect()

    def _collect(self) -> tuple[torch.Tensor, ...]:
        _, ids, rows = self.envs._receive()
        slots = self.slots
        slot, obs = slots.batch(rows) if slots is not None else (0, None)
        outputs = self._free_set()
        arrays = outputs.arrays
        if slots is not None and obs is not None and outputs.copied is not None:  # to the device, from the slot
            slots.copy(slot, obs, outputs.tensors["obs"])
            obs = None
        for name, src in self._src.items():
            if name == "obs":
                if not slot:  # the numpy path's slot, several, or not one block: one copy, from where each is
                    np.take(src, self.envs._buffers.obs_rows(self._all_ids if ids is None else ids), axis=0,
                            out=arrays[name])
            elif ids is None or isinstance(rows, slice):
                np.copyto(arrays[name], src[rows])
            else:
                np.take(src, ids, axis=0, out=arrays[name])
        if ids is not None:
            arrays["env_id"][:] = ids
        if outputs.copied is not None:  # the step's outputs to the device; the infos when asked for (last_info)
            for name in _OUTPUTS:
                if name != "obs" or not slot:
                    outputs.tensors[name].copy_(outputs.host[name], non_blocking=True)
            outputs.copied.record()
            outputs.infos_copied = False
        self._last = outputs
        return outputs.outputs if obs is None else (obs, *outputs.outputs[1:])

    def _flat(self, obs: np.ndarray) -> np.ndarray:
        return self.envs._obs_layout.flat(obs) if self.envs.flatten else obs

    def _free_set(self) -> OutputSet:
        for outputs in self.pool:
            if outputs is not self._last and outputs.free():
                if outputs.copied is not None:
                    outputs.copied.synchronize()  # its pinned host block may still be read by a copy in flight
                return outputs
        self.pool.append(self._new_set())
        return self.pool[-1]

    def last_info(self, name: str) -> torch.Tensor:
        outputs = self._last
        if outputs is None:
            raise NoAsyncCallError("get_last_info: no step received yet through this handle; call recv/step first")
        if not outputs.infos_copied:  # their host side holds the last step's until the set is reused
            assert outputs.copied is not None  # (only CUDA sets copy)
            for info in self.info_names:
                outputs.tensors[info].copy_(outputs.host[info], non_blocking=True)
            outputs.copied.record()  # the set's host side is reused only once these copies are done too
            outputs.infos_copied = True
        return outputs.tensors[name]

    def fake_outputs(self) -> tuple[torch.Tensor, ...]:
        """New tensors shaped like :meth:`recv`'s (built from shapes: under tracing, these are fake tensors)."""
        return tuple(self._like(name) for name in _OUTPUTS)

    def _like(self, name: str) -> torch.Tensor:
        real = self.pool[0].tensors[name]
        return torch.empty(real.shape, dtype=real.dtype, device=real.device)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    return tensor.numpy()


def handle_of(handle: int) -> TorchEnv:
    """The registered env behind ``handle``, or a :class:`ClosedError` saying why there is none."""
    env = _HANDLES.get(int(handle))
    if env is None:
        raise ClosedError(
            f"torch handle {int(handle)} is not registered: it was unregistered, its vector env was closed, or it "
            f"never came from envs.torch()"
        )
    return env


def unregister(handle: int) -> None:
    """Free the tensors of ``handle``; the ops refuse it afterwards. Unregistering twice is an error too."""
    env = handle_of(handle)
    del _HANDLES[env.handle], _TOKENS[env.handle], _INFO_NAMES[env.handle]
    env.pool = []
    env._last = None
    env.envs._torch_handles.discard(env.handle)
    if not env.envs._torch_handles and env.envs._torch_slots is not None:
        env.envs._torch_slots.unpin()


# -- the ops ---------------------------------------------------------------------------------------------------------
# Each op takes the env's token and declares it mutated (see the module docstring); none writes it. They are defined
# with torch.library.Library rather than the @custom_op decorator: same schema and fake kernels, a third of the
# per-call overhead in eager mode (about 7 us against 25 us).

_LIB = torch.library.Library("shoal", "DEF")
_STEP_OUT = "(Tensor, Tensor, Tensor, Tensor, Tensor)"
_LIB.define("send(int handle, Tensor(a!) token, Tensor actions, Tensor? offsets, float gamma) -> ()")
_LIB.define(f"recv(int handle, Tensor(a!) token) -> {_STEP_OUT}")
_LIB.define(f"step(int handle, Tensor(a!) token, Tensor actions, Tensor? offsets, float gamma) -> {_STEP_OUT}")
_LIB.define("last_info(int handle, Tensor(a!) token, str name) -> Tensor")


def _send_impl(handle: int, token: torch.Tensor, actions: torch.Tensor, offsets: Any, gamma: float) -> None:
    handle_of(handle).send(actions, offsets, gamma)


def _recv_impl(handle: int, token: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return handle_of(handle).recv()


def _step_impl(handle: int, token: torch.Tensor, actions: torch.Tensor, offsets: Any, gamma: float) -> tuple:
    return handle_of(handle).step(actions, offsets, gamma)


def _last_info_impl(handle: int, token: torch.Tensor, name: str) -> torch.Tensor:
    return handle_of(handle).last_info(name)


def _send_fake(handle: int, token: torch.Tensor, actions: torch.Tensor, offsets: Any, gamma: float) -> None:
    return None


def _recv_fake(handle: int, token: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return handle_of(handle).fake_outputs()


def _step_fake(handle: int, token: torch.Tensor, actions: torch.Tensor, offsets: Any, gamma: float) -> tuple:
    return handle_of(handle).fake_outputs()


def _last_info_fake(handle: int, token: torch.Tensor, name: str) -> torch.Tensor:
    return handle_of(handle)._like(name)


for _name, _impl, _fake in (
    ("send", _send_impl, _send_fake),
    ("recv", _recv_impl, _recv_fake),
    ("step", _step_impl, _step_fake),
    ("last_info", _last_info_impl, _last_info_fake),
):
    _LIB.impl(_name, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"shoal::{_name}", _fake, lib=_LIB)

_send = torch.ops.shoal.send.default
_recv = torch.ops.shoal.recv.default
_step = torch.ops.shoal.step.default
_last_info = torch.ops.shoal.last_info.default


def _token(handle: int) -> torch.Tensor:
    token = _TOKENS.get(handle)
    if token is None:
        handle_of(handle)  # raises, saying why
        raise AssertionError(f"handle {handle} is registered without its token")
    return token


def send(handle: int, actions: torch.Tensor, offsets: torch.Tensor | None = None, gamma: float = 1.0) -> None:
    """Start a step of the held batch: one action per env, or flat sequences with ``offsets``; returns at once."""
    _send(handle, _token(handle), actions, offsets, gamma)


def recv(handle: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wait for the step ``send`` started: ``(obs, reward, terminated, truncated, steps_taken)``."""
    return _recv(handle, _token(handle))


def step(
    handle: int, actions: torch.Tensor, offsets: torch.Tensor | None = None, gamma: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``send`` then ``recv``."""
    return _step(handle, _token(handle), actions, offsets, gamma)


def get_last_info(handle: int) -> dict[str, torch.Tensor]:
    """The last ``recv``'s info arrays as tensors: ``env_id`` and the engine's own (Atari: ``lives``, ...)."""
    token = _token(handle)
    return {name: _last_info(handle, token, name) for name in _INFO_NAMES[handle]}


def register(envs: Any, device: str | torch.device = "cpu") -> tuple:
    """What ``envs.torch()`` returns: ``(handle, send, step, recv, get_last_info, unregister)``."""
    env = TorchEnv(envs, device)
    _HANDLES[env.handle], _TOKENS[env.handle], _INFO_NAMES[env.handle] = env, torch.zeros(1), env.info_names
    envs._torch_handles.add(env.handle)
    return env.handle, send, step, recv, get_last_info, unregister
