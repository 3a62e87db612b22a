"""shoal.pufferlib against the real PufferLib: the same creators, seeds and actions give the same batches on each
backend (Multiprocessing with one or several blocks, the first envs to finish, and Ray), and PufferLib's trainer
collects the same rollouts. (Its API, attributes and errors: test_pufferlib_api.)"""

from __future__ import annotations

import functools
import threading

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip(
    "pufferlib", reason="PufferLib pins a torch build: pip install --no-deps pufferlib-core==3.0.23 (.ci/run does)"
)
import pufferlib  # noqa: E402
import pufferlib.emulation  # noqa: E402
import pufferlib.vector  # noqa: E402
from pufferlib_reference import (  # noqa: E402
    CONFIGS,
    ENVS,
    assert_same,
    creator,
    pufferlib_workers_joined,  # noqa: F401  (autouse)
    pufferlibs,
    rollout,
)

import shoal.pufferlib  # noqa: E402
from shoal.errors import EnvError  # noqa: E402


@pytest.mark.parametrize("config", CONFIGS)
def test_batches_equal_pufferlibs(config):
    kwargs = dict(config, overwork=True)  # (PufferLib refuses more workers than physical cores without it)
    theirs = pufferlibs(rollout, "spaces", 120, **kwargs)
    assert_same(theirs, rollout(shoal.pufferlib.make, "spaces", 120, **kwargs))
    # async_reset after steps, with steps of other blocks in flight (PufferLib's own hangs there: it reads the infos
    # of a batch it returned once more)
    assert_same(theirs, rollout(shoal.pufferlib.make, "spaces", 120, warmup=37, **kwargs))


@pytest.mark.parametrize("name", ["cartpole", "pendulum"])
@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[1]])
def test_gymnasium_envs_equal_pufferlibs(name, config):
    kwargs = dict(config, overwork=True)
    steps = 420  # (2 blocks: 210 steps of each env, past Pendulum's 200)
    theirs = pufferlibs(rollout, name, steps, **kwargs)
    assert_same(theirs, rollout(shoal.pufferlib.make, name, steps, **kwargs))


@pytest.mark.parametrize("name", ["join_leave", "spread", "late_joiner"])
@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[1]])
def test_pettingzoo_envs_equal_pufferlibs(name, config):
    """Agents as PufferLib's rows: an absent agent's row zeros, terminal and masked out; every agent's infos."""
    kwargs = dict(config, overwork=True)
    theirs = pufferlibs(rollout, name, 120, **kwargs)
    if name == "join_leave":  # masked rows were compared
        assert any(not batch[-1].all() for batch in theirs)
    if name == "late_joiner":  # padding rows (zeros, outside the agents' space) were compared
        assert any((batch[0] == 0).all(axis=1).any() for batch in theirs)
    assert_same(theirs, rollout(shoal.pufferlib.make, name, 120, **kwargs))
    assert_same(theirs, rollout(shoal.pufferlib.make, name, 120, warmup=13, **kwargs))


@pytest.mark.parametrize("config", CONFIGS)
def test_native_envs_equal_pufferlibs(config):
    """Native PufferEnvs: their rows, masks, teacher actions and info lists as they wrote them; never reset by the
    vector env, but at async_reset."""
    kwargs = dict(config, overwork=True)
    theirs = pufferlibs(rollout, "native", 60, **kwargs)
    assert any(not batch[-1].all() for batch in theirs) and any(batch[5] for batch in theirs)  # masks, infos
    assert len({batch[4].tobytes() for batch in theirs}) > 1  # teacher actions the env wrote
    assert_same(theirs, rollout(shoal.pufferlib.make, "native", 60, **kwargs))
    assert_same(theirs, rollout(shoal.pufferlib.make, "native", 60, warmup=11, **kwargs))


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[1]])
def test_notify_reaches_each_env_before_its_next_step_as_on_pufferlib(config):
    kwargs = dict(config, overwork=True)
    theirs = pufferlibs(rollout, "native", 40, notify_at=15, **kwargs)
    assert_same(theirs, rollout(shoal.pufferlib.make, "native", 40, notify_at=15, **kwargs))
    # before a reset: delivered before it (the env starts its agents where notify() put them)
    first = pufferlibs(rollout, "native", 5, warmup=3, notify_at=0, **kwargs)
    assert_same(first, rollout(shoal.pufferlib.make, "native", 5, warmup=3, notify_at=0, **kwargs))
    assert_same(theirs[:15], rollout(shoal.pufferlib.make, "native", 15, **kwargs))  # (the same until then)
    with pytest.raises(AssertionError, match="batch 1[5-7], output 0"):  # and it changed the envs' steps
        assert_same(theirs, rollout(shoal.pufferlib.make, "native", 40, **kwargs))
    vecenv = shoal.pufferlib.make(functools.partial(creator, "cartpole"), backend="Multiprocessing", num_envs=2)
    try:
        vecenv.reset(seed=0)
        vecenv.notify()
        with pytest.raises(EnvError, match="GymnasiumPufferEnv' object has no attribute 'notify'"):
            vecenv.send(np.zeros(2, np.int64))  # (PufferLib's worker dies of it, and its recv then waits forever)
    finally:
        vecenv.close()


def test_notify_reaches_every_env_with_the_first_envs_to_finish():
    """With steps of other envs in flight at each send: each env drifts from its next step on (actions of 1 hold
    the agents still, so a step that moves an agent one way is a drift)."""
    vecenv = shoal.pufferlib.make(functools.partial(creator, "native"), backend="Multiprocessing", num_envs=8,
                                  num_workers=4, batch_size=4, sync_traj=False, zero_copy=False)
    last, sent_at, moves = {}, {}, {"before": set(), "after": set()}
    try:
        vecenv.async_reset(0)
        for t in range(1000):  # (until every row has moved after the notify: which rows come back is timing's)
            obs, *_, env_ids, _ = vecenv.recv()
            for row, (pos, steps, _) in zip(env_ids.tolist(), obs.tolist()):
                if row in last and steps == last[row][1] + 1:  # a step (sent at sent_at), no reset between
                    moves["after" if sent_at[row] >= 10 else "before"].add((row, pos - last[row][0]))
                last[row] = pos, steps
            if t == 10:
                vecenv.notify()
            sent_at.update(dict.fromkeys(env_ids.tolist(), t))
            vecenv.send(np.ones(12, np.int64))
            if t > 20 and {row for row, _ in moves["after"]} == set(range(24)):
                break
    finally:
        vecenv.close()
    assert {move for _, move in moves["before"]} == {0}
    assert {move for _, move in moves["after"]} == {1} and {row for row, _ in moves["after"]} == set(range(24))


def test_native_envs_with_box_actions_equal_pufferlibs():
    kwargs = dict(backend="Multiprocessing", num_workers=4, batch_size=4, overwork=True)
    theirs = pufferlibs(rollout, "native_box", 60, **kwargs)
    assert theirs[1][4].dtype == np.float32 and theirs[1][4].shape == (12, 2)  # teacher actions: Box rows
    assert_same(theirs, rollout(shoal.pufferlib.make, "native_box", 60, **kwargs))


@pytest.mark.ray
@pytest.mark.parametrize("name", ["spaces", "native"])
def test_ray_batches_equal_pufferlibs(name):
    kwargs = dict(backend=pufferlib.vector.Ray, num_workers=2)
    theirs = rollout(pufferlib.vector.make, name, 60, **kwargs)
    ours = rollout(shoal.pufferlib.make, name, 60, **kwargs)
    assert_same(theirs, ours, by_env_id=True)


def per_env_rollout(make, name, each, **kwargs):
    """Each row's own sequence of (observation, reward, terminal, truncation, mask), batches taken until every row
    has ``each`` (which rows a batch holds depends on timing: on a loaded host a worker may fall behind), each row's
    action a function of its id and its own step count."""
    vecenv = make(functools.partial(creator, name), num_envs=8, **kwargs)
    n = vecenv.num_agents
    counts, rows = np.zeros(n, np.int64), {r: [] for r in range(n)}
    try:
        vecenv.async_reset(3)
        for _ in range(100 * each):  # (a bound: a row that never comes back fails below)
            if min(map(len, rows.values())) >= each:
                break
            obs, rewards, terminals, truncations, *_, infos, ids, masks = vecenv.recv()
            for i, r in enumerate(ids.tolist()):
                rows[r].append((obs[i].tobytes(), rewards[i], terminals[i], truncations[i], masks[i]))
            c = counts[ids]
            if name == "spaces":  # MultiDiscrete([3, 5, 2])
                vecenv.send(np.stack([(ids + c) % 3, (ids * c) % 5, c % 2], axis=1))
            else:  # Discrete(4)
                vecenv.send((ids + c) % 4)
            counts[ids] += 1
    finally:
        vecenv.close()
    return rows


@pytest.mark.parametrize("name", ["spaces", "join_leave", "native"])
def test_first_envs_to_finish_step_each_env_as_pufferlib(name):
    kwargs = dict(backend="Multiprocessing", num_workers=4, batch_size=4, sync_traj=False, zero_copy=False,
                  overwork=True)
    theirs = pufferlibs(per_env_rollout, name, 40, **kwargs)
    ours = per_env_rollout(shoal.pufferlib.make, name, 40, **kwargs)
    for r in theirs:
        assert min(len(theirs[r]), len(ours[r])) >= 40, f"row {r}: {len(theirs[r])} and {len(ours[r])} batches"
        assert theirs[r][:40] == ours[r][:40], f"row {r}"
        assert any(t or u for _, _, t, u, _ in ours[r]), f"row {r}: no episode ended"


def _puffer_creator(buf=None, seed=0):
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))  # (its episode returns and lengths: the
    return pufferlib.emulation.GymnasiumPufferEnv(env=env, buf=buf, seed=seed)  # trainer's stats, from the infos)


@pytest.mark.filterwarnings("ignore:In CPU autocast:UserWarning")  # (the trainer's float32 autocast on CPU)
def test_pufferlibs_trainer_collects_on_shoal_what_it_collects_on_pufferlib(tmp_path):
    """PufferLib's trainer, ``pufferlib.pufferl.PuffeRL``, on shoal's vecenv beside its own (Multiprocessing, 8
    CartPoles in RecordEpisodeStatistics, 2 workers): three ``evaluate()`` rollouts of the same policy, torch seeded
    alike, fill its buffers (observations, actions, log-probabilities, rewards, terminals) with the same values, and
    the episode returns and lengths it logs from the infos agree. (Its ``train()`` needs pufferlib-core's ``_C``
    extension, built for CUDA torch 2.9, which does not load beside the CPU torch here.)"""
    pufferl = pytest.importorskip("pufferlib.pufferl", reason="PufferLib's trainer imports pyro: pip install pyro-ppl "
                                                               "rich-argparse (.ci/run does)")
    import pufferlib.models
    import torch

    config = dict(
        torch_deterministic=True, seed=1, batch_size=128, bptt_horizon=16, device="cpu", cpu_offload=False,
        use_rnn=False, minibatch_size=128, max_minibatch_size=128, update_epochs=1, compile=False,
        compile_mode="default", compile_fullgraph=True, optimizer="adam", learning_rate=3e-3, adam_beta1=0.9,
        adam_beta2=0.999, adam_eps=1e-8, total_timesteps=512, precision="float32", data_dir=str(tmp_path),
        env="cartpole",
    )

    def rollouts(make):
        vecenv = make(_puffer_creator, backend=pufferlib.vector.Multiprocessing, num_envs=8, num_workers=2,
                      batch_size=8)
        try:
            torch.manual_seed(0)
            trainer = pufferl.PuffeRL(dict(config), vecenv, pufferlib.models.Default(vecenv.driver_env))
            filled = []
            for _ in range(3):
                stats = trainer.evaluate()
                filled.append([buffer.clone() for buffer in (trainer.observations, trainer.actions,
                                                             trainer.logprobs, trainer.rewards, trainer.terminals)])
            return filled, {key: list(values) for key, values in stats.items() if key != "episode/t"}
        finally:
            for thread in threading.enumerate():  # the trainer's monitor, a thread that is no daemon (started before
                if isinstance(thread, pufferl.Utilization):  # anything in its __init__ can fail)
                    thread.stop()
                    thread.join()
            vecenv.close()

    mine, my_stats = rollouts(shoal.pufferlib.make)
    theirs, their_stats = rollouts(pufferlib.vector.make)
    for k, (got, want) in enumerate(zip(mine, theirs)):
        for name, a, b in zip(("observations", "actions", "logprobs", "rewards", "terminals"), got, want):
            assert torch.equal(a, b), f"evaluate() {k}: {name}"
    assert my_stats == their_stats and len(my_stats["episode/r"]) > 8


REGISTERED = ["Taxi-v4", "Pendulum-v1", "Hopper-v5", "MiniGrid-DoorKey-5x5-v0", "BabyAI-GoToLocal-v0",
              "shoal/Stochastic-v0", "shoal/Spaces-v0", "shoal/Multiagent-v0"]
"""Registered envs of each kind of spaces PufferLib's emulation takes (Discrete, Box of float32 and float64, Dict
with MiniGrid's text mission, a Dict action, MultiDiscrete; Blackjack's Tuple of Discretes fails in PufferLib's own
emulation, as the user's creator, on both)."""


@pytest.mark.parametrize("env_id", REGISTERED)
def test_registered_envs_equal_pufferlibs(env_id):
    pytest.importorskip("minigrid", reason="the test extra installs it")  # (registers MiniGrid's and BabyAI's ids)
    import shoal.sanity  # noqa: F401  (registers shoal's ids)

    ENVS[env_id] = lambda seed: gym.make(env_id, max_episode_steps=7 + seed % 5)
    try:
        kwargs = dict(CONFIGS[0].values[0], overwork=True)
        theirs = pufferlibs(rollout, env_id, 40, **kwargs)
        assert_same(theirs, rollout(shoal.pufferlib.make, env_id, 40, **kwargs))
    finally:
        del ENVS[env_id]
