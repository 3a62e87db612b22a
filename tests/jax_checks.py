"""What needs JAX, in a process of its own (test_envpool.py and test_registry.py run it: once JAX has started, it warns
at every fork, which the test session makes errors).

- shoal.envpool's xla functions inside jax.jit against the same pool's calls from Python: each check makes two pools of
  one task with the same seed, steps one in a jitted ``lax.scan`` of ``step`` (or of ``send`` then ``recv``, with the
  env ids each batch came with) and the other from Python with the same actions, and compares every output, step by
  step; and the outputs' form against the real EnvPool's xla functions.
- An env whose steps call JAX, and Gymnasium's JAX envs (``phys2d/*``, ``tabular/*``, which need flax too), on
  worker processes after JAX has started here, against Gymnasium's SyncVectorEnv bit for bit: their workers start
  with forkserver (forked, they hung in JAX's calls).

Prints one line per check (``python tests/jax_checks.py``: the xla checks; ``... envs [ID ...]``: an env calling JAX,
then those of Gymnasium's JAX envs); exits non-zero on the first difference."""

from __future__ import annotations

import sys

import gymnasium as gym
import jax
import numpy as np

from shoal import envpool
from shoal.errors import ShoalError


def same(step: int, ref: object, got: object) -> None:
    """Equal outputs: the same leaves at the same paths (by name: each dm pool has a State class of its own)."""
    flat_ref, _ = jax.tree_util.tree_flatten_with_path(ref)
    flat_got, _ = jax.tree_util.tree_flatten_with_path(got)
    paths = [jax.tree_util.keystr(path) for path, _ in flat_ref]
    if paths != [jax.tree_util.keystr(path) for path, _ in flat_got]:
        sys.exit(f"step {step}: {[jax.tree_util.keystr(path) for path, _ in flat_got]} != {paths}")
    for path, (_, r), (_, g) in zip(paths, flat_ref, flat_got):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape or not np.array_equal(r.astype(g.dtype), g):
            sys.exit(f"step {step}, {path}: {g} != {r}")


def synchronous(task: str, env_type: str, steps: int = 40, **kwargs: object) -> None:
    xla_pool = envpool.make(task, env_type=env_type, num_envs=4, seed=3, **kwargs)
    py_pool = envpool.make(task, env_type=env_type, num_envs=4, seed=3, **kwargs)
    same(-1, py_pool.reset(), xla_pool.reset())
    handle, recv, send, step = xla_pool.xla()
    actions = np.random.default_rng(0).integers(0, 2, (steps, 4)).astype(np.int32)

    @jax.jit
    def rollout(handle: jax.Array, actions: jax.Array) -> tuple:
        return jax.lax.scan(lambda h, a: step(h, a), handle, actions)

    handle, outputs = rollout(handle, actions)
    for t in range(steps):
        same(t, py_pool.step(actions[t]), jax.tree_util.tree_map(lambda x: np.asarray(x)[t], outputs))
    xla_pool.close(), py_pool.close()
    print(f"synchronous {task} {env_type}: {steps} steps equal")


def asynchronous(task: str, steps: int = 40) -> None:
    """batch_size < num_envs: each send names the envs of the batch the last recv returned. Which envs come first
    is the workers' race, so each env's own trajectory is compared, its actions a function of its observation."""
    kwargs = dict(env_type="gymnasium", num_envs=4, batch_size=2, seed=5, num_threads=2)
    xla_pool, py_pool = envpool.make(task, **kwargs), envpool.make(task, **kwargs)
    for pool in (xla_pool, py_pool):
        pool.async_reset()
    first_xla, first_py = xla_pool.recv(), py_pool.recv()
    handle, recv, send, step = xla_pool.xla()

    def policy(obs: np.ndarray) -> np.ndarray:  # (numpy or jax: the pole's angle says which way to push)
        return (obs[:, 2] > 0).astype(np.int32)

    @jax.jit
    def rollout(handle: jax.Array, env_id: jax.Array, obs: jax.Array) -> tuple:
        def body(carry: tuple, _: None) -> tuple:
            handle, env_id, obs = carry
            handle, outputs = recv(send(handle, policy(obs), env_id))
            return (handle, outputs[4]["env_id"], outputs[0]), outputs
        return jax.lax.scan(body, (handle, env_id, obs), None, length=steps)

    _, outputs = rollout(handle, np.asarray(first_xla[4]["env_id"]), np.asarray(first_xla[0]))
    got = [jax.tree_util.tree_map(lambda x: np.asarray(x)[t], outputs) for t in range(steps)]
    ref, last = [], first_py
    for _ in range(steps):
        py_pool.send(policy(last[0]), last[4]["env_id"])
        last = py_pool.recv()
        ref.append(last)

    def by_env(batches: list) -> dict:
        rows: dict = {}
        for obs, reward, terminated, truncated, info in batches:
            for j, e in enumerate(np.asarray(info["env_id"]).tolist()):
                rows.setdefault(e, []).append((obs[j], reward[j], terminated[j], truncated[j], info["elapsed_step"][j]))
        return rows

    ref_rows, got_rows = by_env([first_py] + ref), by_env([first_xla] + got)
    for e in range(4):  # (the pools may have stepped each env a different number of times: compare what both did)
        n = min(len(ref_rows.get(e, [])), len(got_rows.get(e, [])))
        if n < 5:
            sys.exit(f"env {e} stepped {n} times in both")
        same(e, ref_rows[e][:n], got_rows[e][:n])
    xla_pool.close(), py_pool.close()
    print(f"asynchronous {task}: {steps} batches, each env's trajectory equal")


def same_form_as_envpools(task: str, env_type: str, **kwargs: object) -> None:
    """What one jitted step returns has the paths, shapes and dtypes of what the real EnvPool's xla step returns
    (but EnvPool 1.2's info["ram"], which shoal.envpool does not provide: the README says so)."""
    import envpool as real

    forms = []
    for make in (real.make, envpool.make):
        pool = make(task, env_type=env_type, num_envs=4, seed=3, **kwargs)
        pool.reset()
        handle, recv, send, step = pool.xla()
        _, outputs = jax.jit(step)(handle, np.zeros(4, np.int32))
        flat, _ = jax.tree_util.tree_flatten_with_path(outputs)
        forms.append([(jax.tree_util.keystr(path), leaf.shape, str(leaf.dtype)) for path, leaf in flat
                      if jax.tree_util.keystr(path) != "[4]['ram']"])
        pool.close()
    if forms[0] != forms[1]:
        sys.exit(f"{task} {env_type}: shoal's {forms[1]} != EnvPool's {forms[0]}")
    print(f"form of {task} {env_type}: EnvPool's")


def traced_before_reset() -> None:
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=2, backend="serial")
    handle, recv, send, step = pool.xla()
    try:
        jax.jit(recv)(handle)
    except ShoalError as exc:
        assert "reset() it first" in str(exc), exc
        print("traced before a reset: refused")
    else:
        sys.exit("tracing before a reset was not refused")
    finally:
        pool.close()


class JaxWalk(gym.Env):
    """A walk whose steps run on JAX (a jitted update of its position): what a worker forked after JAX started hung
    in."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = jax.numpy.asarray(self.np_random.normal(size=2), jax.numpy.float32)
        return np.asarray(self.pos), {}

    def step(self, action):
        self.pos = _moved(self.pos, action)
        return np.asarray(self.pos), float(self.pos.sum()), bool(self.pos[0] > 1.5), False, {}


@jax.jit
def _moved(pos: jax.Array, action: jax.Array) -> jax.Array:
    return pos * 0.9 + jax.numpy.where(action == 1, 0.25, -0.1)


def jax_envs_in_workers(env_ids: list[str]) -> None:
    """JaxWalk, then each of ``env_ids`` (Gymnasium's JAX envs), on 2 workers (episodes cut short at different
    steps), after JAX has started in this process, equals Gymnasium's SyncVectorEnv of the same envs, step by step."""
    import functools

    from gymnasium.vector import AutoresetMode
    from helpers import assert_same, beside_gymnasium

    from shoal.vector import processes

    jax.numpy.zeros(1).block_until_ready()  # JAX's runtime started (the reference below would start it too)
    assert processes.jax_started()
    fns_of = {"JaxWalk": lambda i: functools.partial(gym.wrappers.TimeLimit, JaxWalk(), 9 + 5 * i)}
    for env_id in ["JaxWalk", *env_ids]:
        make = fns_of.get(env_id, lambda i: functools.partial(gym.make, env_id, max_episode_steps=9 + 5 * i))
        fns = [make(i) for i in range(3)]
        with beside_gymnasium(fns, AutoresetMode.NEXT_STEP, num_workers=2, inline=False) as (envs, ref):
            kinds = {type(proc).__name__ for proc in envs._transport._procs.values()}
            if kinds != {"ForkServerProcess"}:
                sys.exit(f"{env_id}: workers {kinds}, not forkserver's")
            assert_same(envs.reset(seed=3), ref.reset(seed=3), "reset")
            ref.action_space.seed(5)
            for t in range(40):
                actions = ref.action_space.sample()
                assert_same(envs.step(actions), ref.step(actions), f"{env_id} step {t}")
        print(f"{env_id} on forkserver workers: 40 steps equal")


if __name__ == "__main__":
    if sys.argv[1:2] == ["envs"]:
        jax_envs_in_workers(sys.argv[2:])
        sys.exit()
    synchronous("CartPole-v1", "gymnasium")
    synchronous("Pong-v5", "gymnasium", episodic_life=True, reward_clip=True)
    synchronous("Breakout-v5", "gym", episodic_life=True, reward_clip=True)  # gym 0.23.1: cleanrl's 4-tuples
    synchronous("CartPole-v1", "dm")
    asynchronous("CartPole-v1")
    same_form_as_envpools("Pong-v5", "gymnasium")
    same_form_as_envpools("CartPole-v1", "gymnasium")
    traced_before_reset()
