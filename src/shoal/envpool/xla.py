"""EnvPool's XLA functions over a shoal pool: ``handle, recv, send, step = pool.xla()``, which ``jax.jit`` and its
loops (``lax.fori_loop``, ``lax.scan``) trace as they trace EnvPool's, so code written for them (cleanrl's
``ppo_atari_envpool_xla_jax.py``) runs with its import changed.

EnvPool compiles its C++ pool into the graph as an XLA custom call. shoal's envs step in worker processes, so each
function here is the pool's own ``send``/``recv`` run on the host through ``jax.experimental.io_callback``, ordered:
the jitted program calls them in the order it was written, each call once, and what the envs see is what the same
calls from Python would give them (the tests compare the two step by step). ``send(handle, action, env_id=None)``
returns the handle; ``recv(handle)`` returns ``(handle, outputs)``, the outputs in the pool's API (``env_type``) as
its ``recv()`` returns them; ``step`` is both. The handle is a token the calls pass on, as EnvPool's is (8 bytes
naming the pool); the callbacks being ordered is what keeps the calls in the program's order.

The outputs' shapes and dtypes are fixed when a function is traced: those of the last batch the pool returned (so
reset it first, as code written for EnvPool does before it steps), with JAX's dtypes (float64 as float32 unless
``jax_enable_x64`` is set). A batch of another form later (an info key that comes and goes) is an error naming the
difference, not a silent change.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from shoal.errors import MissingDependencyError, ShoalError

if TYPE_CHECKING:
    from shoal.envpool.pool import EnvPool


def xla_functions(pool: EnvPool) -> tuple[np.ndarray, Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``(handle, recv, send, step)`` over ``pool`` (see the module's docs)."""
    try:
        import jax
        from jax.experimental import io_callback
    except ImportError as exc:
        raise MissingDependencyError('pool.xla() needs JAX: pip install "shoal[jax]"') from exc
    handle = np.frombuffer(id(pool).to_bytes(8, "little"), np.uint8).copy()
    handle_shape = jax.ShapeDtypeStruct(handle.shape, handle.dtype)

    def recv(handle: Any) -> Any:
        shapes = _output_shapes(jax, pool)
        return io_callback(functools.partial(_host_recv, jax, pool, shapes), (handle_shape, shapes), handle,
                           ordered=True)

    def send(handle: Any, action: Any, env_id: Any = None) -> Any:
        arguments = (handle, action) if env_id is None else (handle, action, env_id)
        return io_callback(functools.partial(_host_send, pool), handle_shape, *arguments, ordered=True)

    def step(handle: Any, action: Any, env_id: Any = None) -> Any:  # (one callback: each costs ~0.1 ms)
        shapes = _output_shapes(jax, pool)
        arguments = (handle, action) if env_id is None else (handle, action, env_id)
        return io_callback(functools.partial(_host_step, jax, pool, shapes), (handle_shape, shapes), *arguments,
                           ordered=True)

    return handle, recv, send, step


def _output_shapes(jax: Any, pool: EnvPool) -> Any:
    """The shapes and dtypes (JAX's) of what ``pool.recv()`` returns, from the last batch it returned."""
    batch = pool._last_batch
    if batch is None:
        raise ShoalError(
            "trace the pool's xla functions after it has returned a batch (reset() it first, or async_reset() and "
            "recv()): the shapes of what recv returns are those of its batches"
        )

    def shape(value: Any) -> Any:
        array = np.asarray(value)
        return jax.ShapeDtypeStruct(array.shape, jax.dtypes.canonicalize_dtype(array.dtype))

    return jax.tree_util.tree_map(shape, pool._format.step(batch))


def _host_recv(jax: Any, pool: EnvPool, shapes: Any, handle: np.ndarray) -> tuple[np.ndarray, Any]:
    outputs = pool.recv()
    tree = jax.tree_util
    if tree.tree_structure(outputs) != tree.tree_structure(shapes):
        raise ShoalError(
            f"the pool's recv() returned {tree.tree_structure(outputs)}, not the form its xla functions were traced "
            f"with ({tree.tree_structure(shapes)}): an info key that comes and goes cannot pass through XLA"
        )

    def cast(value: Any, shape: Any) -> np.ndarray:
        array = np.asarray(value)
        if array.shape != shape.shape:
            raise ShoalError(f"the pool's recv() returned an array of shape {array.shape} where its xla functions "
                             f"were traced with {shape.shape}")
        return array.astype(shape.dtype, copy=False)

    return np.asarray(handle), tree.tree_map(cast, outputs, shapes)


def _host_step(jax: Any, pool: EnvPool, shapes: Any, handle: np.ndarray, action: Any,
               env_id: Any = None) -> tuple[np.ndarray, Any]:
    return _host_recv(jax, pool, shapes, _host_send(pool, handle, action, env_id))


def _host_send(pool: EnvPool, handle: np.ndarray, action: Any, env_id: Any = None) -> np.ndarray:
    pool.send(np.asarray(action), None if env_id is None else np.asarray(env_id))
    return np.asarray(handle)
