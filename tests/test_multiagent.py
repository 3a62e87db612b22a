"""Multi-agent (PettingZoo) envs with agents as rows: equal to the same envs stepped by hand, on every backend."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest
from gymnasium import spaces

import shoal
from fakes import (
    JOIN_LEAVE_OBS, Chatter, DictJoinLeave, JoinLeave, LiesAboutObs, Mixed, Relay, VariedAgents, rps_raising,
)
from shoal import errors
from shoal.multiagent.engine import PettingZooEngine

pytest.importorskip("pettingzoo")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.butterfly import knights_archers_zombies_v11, pistonball_v6
    from pettingzoo.classic import rps_v2, tictactoe_v3
from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel
from mpe2 import simple_adversary_v3, simple_speaker_listener_v4, simple_spread_v3, simple_tag_v3


def zero_like(space):
    if isinstance(space, spaces.Dict):  # (the padding of a structured observation: zeros in every leaf)
        return {key: zero_like(sub) for key, sub in space.spaces.items()}
    return np.zeros(space.shape, space.dtype)


def assert_obs(mine, expected, where):
    if isinstance(expected, dict):
        assert isinstance(mine, dict) and mine.keys() == expected.keys(), f"{where}: keys"
        for key in expected:
            assert_obs(mine[key], expected[key], f"{where}[{key!r}]")
    else:
        np.testing.assert_array_equal(mine, expected.astype(mine.dtype), err_msg=where)


class ByHand:
    """``n`` PettingZoo Parallel envs stepped with PettingZoo's own API, giving the rows shoal must give: agents in
    ``possible_agents`` order, padding rows (obs 0, reward 0, terminated, not truncated, unmasked), an env's episode
    over when it has no agents left, next-step autoreset of the whole env (seed None)."""

    def __init__(self, fn, n, convert=None):
        self.envs = [(convert or (lambda e: e))(fn()) for _ in range(n)]
        self.agents = list(self.envs[0].possible_agents)
        self.spaces = {a: self.envs[0].observation_space(a) for a in self.agents}
        first = self.spaces[self.agents[0]]
        boxes = all(isinstance(s, spaces.Box) and (s.shape, s.dtype) == (first.shape, first.dtype)
                    for s in self.spaces.values())
        same = boxes or all(s == first for s in self.spaces.values())
        # rows of agents whose spaces differ: each flattened by Gymnasium and padded to the longest
        self.width = None if same else max(spaces.flatdim(s) for s in self.spaces.values())
        self.space = first
        self.actions = {a: self.envs[0].action_space(a) for a in self.agents}
        self.over = [False] * n

    def _action(self, agent, row):
        """The agent's own action in its row: where the agents' Box actions differ in size, its first entries."""
        space = self.actions[agent]
        if isinstance(space, spaces.Box) and np.size(row) != spaces.flatdim(space):
            return np.asarray(row)[: spaces.flatdim(space)].reshape(space.shape)
        return row

    def _obs(self, agent, value):
        if self.width is None:
            return value if isinstance(value, dict) else np.asarray(value)
        flat = spaces.flatten(self.spaces[agent], value)
        return np.concatenate([flat, np.zeros(self.width - len(flat), flat.dtype)])

    def _rows(self, obs, flags):
        out = []
        for agent in self.agents:
            if agent in obs:
                r, te, tr = (0.0, False, False)
                if flags:
                    r, te, tr = float(flags[0][agent]), bool(flags[1][agent]), bool(flags[2][agent])
                out.append((self._obs(agent, obs[agent]), r, te, tr, True))
            else:
                zero = zero_like(self.space) if self.width is None else np.zeros(self.width)
                out.append((zero, 0.0, True, False, False))
        return out

    def _stack(self, rows):
        obs, rew, term, trunc, mask = zip(*rows)
        if isinstance(self.space, spaces.Dict) and self.width is None:  # (action masks beside the board)
            stacked = {key: np.stack([o[key] for o in obs]) for key in self.space.spaces}
        else:
            stacked = np.stack(obs)
        return stacked, np.array(rew), np.array(term), np.array(trunc), np.array(mask)

    def reset(self, seed):
        rows = []
        for e, env in enumerate(self.envs):
            obs, _ = env.reset(seed=seed + e)
            rows += self._rows(obs, None)
            self.over[e] = False
        return self._stack(rows)

    def step(self, actions):
        rows, a = [], len(self.agents)
        for e, env in enumerate(self.envs):
            if self.over[e]:
                obs, _ = env.reset()
                rows += self._rows(obs, None)
                self.over[e] = False
                continue
            act = {agent: self._action(agent, actions[e * a + self.agents.index(agent)]) for agent in env.agents}
            obs, rew, term, trunc, _ = env.step(act)
            rows += self._rows(obs, (rew, term, trunc))
            self.over[e] = not env.agents or all(term[x] or trunc[x] for x in obs)
        return self._stack(rows)


def assert_rows(mine, expected, where):
    obs, rew, term, trunc, info = mine
    e_obs, e_rew, e_term, e_trunc, e_mask = expected
    assert_obs(obs, e_obs, f"{where}: obs")
    np.testing.assert_array_equal(rew, e_rew, err_msg=f"{where}: rewards")
    np.testing.assert_array_equal(term, e_term, err_msg=f"{where}: terminations")
    np.testing.assert_array_equal(trunc, e_trunc, err_msg=f"{where}: truncations")
    np.testing.assert_array_equal(info["agent_mask"], e_mask, err_msg=f"{where}: agent_mask")


def run_beside(fn, n, steps, config, seed=3, convert=None):
    """Step shoal's vector env of ``fn`` and :class:`ByHand` with the same random actions; returns the masks seen.
    ``config["wrappers"]`` wrap shoal's envs and, applied in the same order by hand, :class:`ByHand`'s."""

    def by_hand(env):
        for wrapper in config.get("wrappers", ()):
            env = wrapper(env)
        return (convert or (lambda e: e))(env)

    hand = ByHand(fn, n, by_hand)
    masks = []
    with shoal.make(fn, n, **config) as envs:
        assert envs.possible_agents == hand.agents
        obs, info = envs.reset(seed=seed)
        expected = hand.reset(seed)
        assert_obs(obs, expected[0], "reset: obs")
        np.testing.assert_array_equal(info["agent_mask"], expected[4])
        envs.action_space.seed(seed)
        for t in range(steps):
            actions = envs.action_space.sample()
            mine = envs.step(actions)
            assert_rows(mine, hand.step(actions), f"step {t}")
            masks.append(mine[4]["agent_mask"].reshape(n, -1))
    return np.array(masks)


SMALL_BACKENDS = [
    pytest.param({"backend": "serial"}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "spawn", "inline": False}, id="mp-spawn"),
    pytest.param({"backend": "ray", "num_workers": 2}, id="ray", marks=pytest.mark.ray),
]


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_simple_spread_equals_pettingzoo_by_hand(config):
    masks = run_beside(partial(simple_spread_v3.parallel_env, max_cycles=5), 4, 13, config)
    assert masks.all()  # MPE agents never leave; episodes end by truncation (twice here)


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_wrappers_wrap_each_pettingzoo_env_where_it_is_made(config):
    from supersuit import clip_reward_v0, dtype_v0

    fn = partial(simple_spread_v3.parallel_env, max_cycles=5)
    wrappers = [partial(dtype_v0, dtype=np.float64), partial(clip_reward_v0, lower_bound=-0.6, upper_bound=0.6)]
    masks = run_beside(fn, 3, 9, {**config, "wrappers": wrappers})
    assert masks.all()
    with shoal.make(fn, 3, wrappers=wrappers, **config) as envs:  # the spaces are the wrapped env's
        assert envs.single_observation_space.dtype == np.float64  # simple_spread's own are float32


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_knights_archers_zombies_removes_agents_mid_episode(config):
    fn = partial(knights_archers_zombies_v11.parallel_env, line_death=True, max_cycles=30)
    masks = run_beside(fn, 2, 70, config, seed=3)
    partly = masks.any(axis=2) & ~masks.all(axis=2)  # some agents of an env gone, others still playing
    assert partly.any(), "no agent died mid-episode: the test would not show removal"


@pytest.mark.parametrize(
    "config",
    [pytest.param({"backend": "serial"}, id="serial"),
     pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp")],
)
def test_pistonball_images_and_twenty_agents(config):
    fn = partial(pistonball_v6.parallel_env, max_cycles=6)
    run_beside(fn, 2, 14, config)


def test_pistonball_on_ray(ray_session):
    run_beside(partial(pistonball_v6.parallel_env, max_cycles=4), 2, 9, {"backend": "ray", "num_workers": 2})


# -- ordering, padding and masks: the scripted variable population --------------------------------------------------

P = None  # shorthand for a padding observation in the tables
# step -> (observation [base + t, number, last action] per row a, b, c or P; rewards; terminated; truncated; mask),
# every action 1, reset seed 7 (base 7); step 7 is the autoreset (seed None: base 1007).
NEXT_STEP_TABLE = [
    ([[8, 0, 1], [8, 1, 1], P], [11, 11, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
    ([[9, 0, 1], [9, 1, 1], P], [21, 21, 0], [0, 1, 1], [0, 0, 0], [1, 1, 0]),
    ([[10, 0, 1], P, [10, 2, 0]], [31, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([[11, 0, 1], P, [11, 2, 1]], [41, 0, 41], [0, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([[12, 0, 1], P, [12, 2, 1]], [51, 0, 51], [1, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([P, P, [13, 2, 1]], [0, 0, 61], [1, 1, 0], [0, 0, 1], [0, 0, 1]),
    ([[1007, 0, 0], [1007, 1, 0], P], [0, 0, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
    ([[1008, 0, 1], [1008, 1, 1], P], [11, 11, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
]


def table_obs(rows):
    return np.array([[0, 0, 0] if r is None else r for r in rows], np.int64)


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_variable_population_rows_next_step(config):
    with shoal.make(JoinLeave, 2, autoreset_mode="next_step", **config) as envs:
        assert (envs.num_envs, envs.num_multiagent_envs, envs.agents_per_env) == (6, 2, 3)
        assert envs.row_agent == ["a", "b", "c", "a", "b", "c"]
        np.testing.assert_array_equal(envs.row_env, [0, 0, 0, 1, 1, 1])
        obs, info = envs.reset(seed=[7, 7])
        np.testing.assert_array_equal(obs[:3], table_obs([[7, 0, 0], [7, 1, 0], P]))
        np.testing.assert_array_equal(info["agent_mask"], [1, 1, 0, 1, 1, 0])
        np.testing.assert_array_equal(info["hello"], [0, 1, 0, 0, 1, 0])
        np.testing.assert_array_equal(info["_hello"], [1, 1, 0, 1, 1, 0])
        np.testing.assert_array_equal(info["env_index"], [0, 0, 0, 1, 1, 1])
        np.testing.assert_array_equal(info["agent_index"], [0, 1, 2, 0, 1, 2])
        for t, (rows, rew, term, trunc, mask) in enumerate(NEXT_STEP_TABLE, start=1):
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
            for e in range(2):
                np.testing.assert_array_equal(obs[3 * e : 3 * e + 3], table_obs(rows), err_msg=f"step {t}")
                np.testing.assert_array_equal(r[3 * e : 3 * e + 3], rew, err_msg=f"step {t}")
                np.testing.assert_array_equal(te[3 * e : 3 * e + 3], np.array(term, bool), err_msg=f"step {t}")
                np.testing.assert_array_equal(tr[3 * e : 3 * e + 3], np.array(trunc, bool), err_msg=f"step {t}")
                np.testing.assert_array_equal(info["agent_mask"][3 * e : 3 * e + 3], np.array(mask, bool))
            live = np.tile(np.array(mask, bool), 2)
            if t == 7:  # the autoreset step: the reset infos, in the live rows
                np.testing.assert_array_equal(info["_hello"], live)
            else:
                np.testing.assert_array_equal(info["t"][live], t if t < 7 else t - 7)  # the env's own step count
                np.testing.assert_array_equal(info["_t"], live)


def test_variable_population_rows_same_step():
    with shoal.make(JoinLeave, 1, autoreset_mode="same_step", backend="serial") as envs:
        envs.reset(seed=7)
        for t in range(5):
            envs.step(np.ones(3, np.int64))
        obs, r, te, tr, info = envs.step(np.ones(3, np.int64))  # step 6 ends the episode and resets at once
        np.testing.assert_array_equal(obs, table_obs([[1007, 0, 0], [1007, 1, 0], P]))  # the new episode
        np.testing.assert_array_equal(r, [0, 0, 61])  # the final step's rewards and flags
        np.testing.assert_array_equal(te, [True, True, False])
        np.testing.assert_array_equal(tr, [False, False, True])
        np.testing.assert_array_equal(info["agent_mask"], [True, True, False])  # of the observations returned
        np.testing.assert_array_equal(info["_final_obs"], [True, True, True])
        np.testing.assert_array_equal(info["final_obs"][2], [13, 2, 1])
        np.testing.assert_array_equal(info["final_obs"][0], [0, 0, 0])
        assert info["final_info"]["t"][2] == 6 and not info["final_info"]["_t"][0]
        np.testing.assert_array_equal(info["_hello"], [True, True, False])


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_same_step_final_observations_keep_their_loose_leaves(config):
    """A Text leaf travels beside the shared records; in same-step mode each ended row's final_obs still holds it,
    as the env returned it at the step that ended the episode (and the next episode's first observation is the one
    returned). The env keeps its info dicts and changes them in that reset: ``final_info`` holds them as they were."""
    with shoal.make(partial(Chatter, keep_infos=True), 2, autoreset_mode="same_step", **config) as envs:
        obs, _ = envs.reset(seed=0)
        assert list(obs["said"]) == ["0:0:0", "0:0:1"] * 2
        for _ in range(2):
            obs, _, te, _, info = envs.step(np.zeros(4, np.int64))
        assert "final_obs" not in info
        obs, _, te, _, info = envs.step(np.zeros(4, np.int64))  # step 3 ends every episode
        assert te.all() and info["_final_obs"].all()
        for row in range(4):
            assert info["final_obs"][row]["said"] == f"0:3:{row % 2}"
            np.testing.assert_array_equal(info["final_obs"][row]["t"], [3])
        assert list(obs["said"]) == ["1:0:0", "1:0:1"] * 2
        np.testing.assert_array_equal(info["final_info"]["t"], [3] * 4)
        np.testing.assert_array_equal(info["t"], [0] * 4)  # the reset's


def test_variable_population_disabled_autoreset_and_partial_reset():
    with shoal.make(JoinLeave, 2, autoreset_mode="disabled", backend="serial") as envs:
        envs.reset(seed=[7, 50])
        for _ in range(6):
            envs.step(np.ones(6, np.int64))
        with pytest.raises(errors.ResetNeededError, match=r"envs \[0, 1, 2, 3, 4, 5\] ended their episode"):
            envs.step(np.ones(6, np.int64))
        with pytest.raises(errors.ResetArgumentError, match=r"selects some rows of env 1 \(rows 3-5\) but not all"):
            envs.reset(options={"reset_mask": np.array([0, 0, 0, 1, 0, 0], bool)})
        with pytest.raises(errors.ResetArgumentError, match=r"selects some rows of env 1 \(rows 3-5\) but not all"):
            envs.reset(options={"reset_mask": np.array([0, 0, 0, 1, 1, 0], bool)})  # its third row alone left out
        obs, info = envs.reset(seed=[None, 90], options={"reset_mask": np.array([False, True])})  # one bool per env
        np.testing.assert_array_equal(obs[3:], table_obs([[90, 0, 0], [90, 1, 0], P]))
        np.testing.assert_array_equal(obs[:3], table_obs([P, P, [13, 2, 1]]))  # env 0 untouched
        with pytest.raises(errors.ResetNeededError, match=r"envs \[0, 1, 2\]"):
            envs.step(np.ones(6, np.int64))


def test_async_batches_are_whole_envs():
    with shoal.make(JoinLeave, 4, backend="multiprocessing", num_workers=2, batch_size=6, context="fork") as envs:
        obs, info = envs.reset(seed=0)
        seen = set()
        for t in range(2000):  # (every env comes in some batch, though on 2 cores the second worker's first answer
            # can come after a dozen of the first's, idle, and under CI's load after more than 8)
            ids = info["env_id"]
            assert len(ids) == 6 and (ids.reshape(2, 3) % 3 == [0, 1, 2]).all()
            np.testing.assert_array_equal(info["env_index"], ids // 3)
            seen |= set((ids // 3).tolist())
            if t >= 8 and seen == {0, 1, 2, 3}:
                break
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
        assert seen == {0, 1, 2, 3}
    with pytest.raises(errors.ConfigError, match=r"batch_size must be a multiple of 3"):
        shoal.make(JoinLeave, 4, backend="serial", batch_size=4)
    with pytest.raises(errors.ConfigError, match=r"num_workers must be between 1 and the number of envs \(4, of 3"):
        shoal.make(JoinLeave, 4, backend="multiprocessing", num_workers=5)


# -- AEC envs, heterogeneous agents, calls ----------------------------------------------------------------------------


def test_aec_envs_are_converted():
    # rps is parallelizable: aec_to_parallel; tictactoe is turn-based: one agent acts per step
    run_beside(rps_v2.env, 2, 8, {"backend": "serial"}, convert=aec_to_parallel)
    with shoal.make(tictactoe_v3.env, 2, backend="serial") as envs:
        obs, info = envs.reset(seed=0)
        assert set(obs) == {"observation", "action_mask"} and obs["observation"].shape == (4, 3, 3, 2)
    hand = ByHand(tictactoe_v3.env, 1, convert=turn_based_aec_to_parallel)
    with shoal.make(tictactoe_v3.env, 1, backend="serial") as envs:
        obs, _ = envs.reset(seed=0)
        hand.reset(0)
        for move in [0, 3, 1, 4, 2, 5, 6]:  # player_1 wins on move 5 (0-1-2); then the game restarts
            actions = np.array([move, move])
            obs, r, te, tr, info = envs.step(actions)
            expected = hand.step(actions)
            np.testing.assert_array_equal(obs["observation"], expected[0]["observation"])
            np.testing.assert_array_equal(r, expected[1])
            np.testing.assert_array_equal(te, expected[2])
        assert r.tolist() == [0.0, 0.0] and not te.any()  # the move after the win was the autoreset step


def test_heterogeneous_observations_are_flattened_rows():
    fn = simple_adversary_v3.parallel_env
    probe = fn()
    sizes = {a: probe.observation_space(a).shape[0] for a in probe.possible_agents}
    assert len(set(sizes.values())) > 1  # the adversary sees less than the good agents
    with shoal.make(fn, 2, backend="serial") as envs:
        assert envs.single_observation_space.shape == (max(sizes.values()),)
        obs, _ = envs.reset(seed=4)
        probe.reset(seed=4)
        expected, _ = probe.reset(seed=4)
        for k, agent in enumerate(envs.possible_agents):
            n = sizes[agent]
            np.testing.assert_array_equal(obs[k, :n], expected[agent])
            assert not obs[k, n:].any()  # zero padding
            back = envs.unflatten_agent(agent, obs[[k, k + 3]])
            assert back.shape == (2, n)
            np.testing.assert_array_equal(back[0], expected[agent])
        with pytest.raises(errors.ConfigError, match=r"unknown agent 'nobody'"):
            envs.unflatten_agent("nobody", obs)
    run_beside(partial(fn, max_cycles=4), 2, 9, {"backend": "multiprocessing", "num_workers": 2, "context": "fork"})


def test_heterogeneous_discrete_actions_are_checked_per_agent():
    class TwoSizes(JoinLeave):
        def action_space(self, agent):
            return spaces.Discrete(2 if agent == "b" else 4)

    with shoal.make(TwoSizes, 2, backend="serial") as envs:
        assert envs.single_action_space == spaces.Discrete(4)
        envs.reset(seed=0)
        envs.step(np.array([3, 1, 3, 3, 1, 3]))
        message = r"row 4 \(env 1, agent 'b'\) got action 3, outside that agent's Discrete\(2\)"
        with pytest.raises(errors.ActionError, match=message):
            envs.step(np.array([3, 1, 3, 3, 3, 3]))


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "box"])
def test_agents_of_different_action_spaces_sample_an_action_of_its_own_for_every_row(continuous):
    """MPE's simple_speaker_listener: the speaker says one of 3 words, the listener moves (5 moves; continuous: Boxes
    of 3 and 5 entries). ``action_space.sample()``, the random policy's idiom, gives every row an action of its own
    agent's space; stepped with such actions the rows equal PettingZoo's stepped by hand."""
    fn = partial(simple_speaker_listener_v4.parallel_env, max_cycles=6, continuous_actions=continuous)
    probe = fn()
    own = [probe.action_space(agent) for agent in probe.possible_agents]
    assert len({str(space) for space in own}) == 2
    with shoal.make(fn, 3, backend="serial") as envs:
        envs.action_space.seed(0)
        for _ in range(200):
            sample = envs.action_space.sample()
            assert sample.shape[0] == 6 and envs.action_space.contains(sample)
            for row, space in zip(sample, own * 3):
                size = spaces.flatdim(space) if continuous else 1
                mine = row[:size].reshape(space.shape).astype(space.dtype) if continuous else np.int64(row)
                assert space.contains(mine), (mine, space)
                assert continuous or envs.single_action_space.contains(np.int64(row))
    for config in ({"backend": "serial"}, {"backend": "multiprocessing", "num_workers": 2, "batch_size": 4}):
        if "batch_size" not in config:
            run_beside(fn, 3, 20, config)
            continue
        with shoal.make(fn, 4, **config) as envs:  # asynchronous batches of two whole envs: the same rows' space
            envs.reset(seed=1)
            envs.action_space.seed(1)
            for _ in range(20):
                envs.step(envs.action_space.sample())


def test_box_actions_of_different_bounds_and_sizes_sample_within_each_agents_own():
    own = {"a": spaces.Box(-1, 1, (2,), np.float32), "b": spaces.Box(0, 5, (3,), np.float32),
           "c": spaces.Box(np.array([2, -3], np.float32), np.array([4, -2], np.float32))}

    class ThreeBoxes(JoinLeave):
        def action_space(self, agent):
            return own[agent]

    with shoal.make(ThreeBoxes, 2, backend="serial") as envs:
        assert envs.single_action_space.shape == (3,)  # (one flat Box of the widest bounds)
        envs.action_space.seed(0)
        for _ in range(200):
            sample = envs.action_space.sample()
            assert sample.shape == (6, 3) and envs.single_action_space.contains(sample[0])
            for row, agent in zip(sample, "abcabc"):
                space = own[agent]
                assert space.contains(row[: space.shape[0]]), (agent, row)


def test_incompatible_action_spaces_are_refused_with_a_way_out():
    class Mixed(JoinLeave):
        def action_space(self, agent):
            return spaces.Discrete(2) if agent == "a" else spaces.Box(-1, 1, (2,), np.float32)

    with pytest.raises(errors.ConfigError, match=r"action spaces differ .* pad_action_space_v0"):
        shoal.make(Mixed, 2, backend="serial")


def test_calls_run_once_per_env():
    with shoal.make(JoinLeave, 2, backend="multiprocessing", num_workers=2, context="fork") as envs:
        envs.reset(seed=[7, 50])
        assert envs.get_attr("base") == (7, 7, 7, 50, 50, 50)
        envs.set_attr("fail_at", [None, None, None, 99, 99, 99])
        assert envs.get_attr("fail_at") == (None, None, None, 99, 99, 99)
        assert envs.call_envs([4], lambda env: env.t) == [0]
        assert envs.call("observation_space", "a") == (JOIN_LEAVE_OBS,) * 6


def test_torch_ops_step_rows():
    torch = pytest.importorskip("torch")
    with shoal.make(JoinLeave, 2, backend="serial") as envs, shoal.make(JoinLeave, 2, backend="serial") as plain:
        envs.reset(seed=7)
        plain.reset(seed=7)
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        for t in range(8):
            obs, reward, term, trunc, _ = step(handle, torch.ones(6, dtype=torch.int64))
            expected = plain.step(np.ones(6, np.int64))
            np.testing.assert_array_equal(obs.numpy(), expected[0])
            np.testing.assert_array_equal(reward.numpy(), expected[1])
            np.testing.assert_array_equal(term.numpy(), expected[2])
            np.testing.assert_array_equal(get_last_info(handle)["agent_mask"].numpy(), expected[4]["agent_mask"])
        unregister(handle)


def test_sequences_are_refused():
    with shoal.make(JoinLeave, 1, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.ActionError, match=r"action sequences are not supported on a multi-agent"):
            envs.step([np.array([1, 1])] * 3)


# -- faults ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", SMALL_BACKENDS[:2])
def test_a_raising_agent_step_names_env_and_agent(config):
    with shoal.make(rps_raising, 2, **config) as envs:
        envs.reset(seed=0)
        envs.step(np.array([0, 1, 1, 1]))
        message = r"env 1 \(rps_v2, rows 2-3\) raised ValueError stepping agent 'player_1' in step\(\): illegal move 2"
        with pytest.raises(ValueError, match=message) as caught:
            envs.step(np.array([0, 1, 1, 2]))
        assert isinstance(caught.value, errors.EnvError) and caught.value.env_id == 1
    with shoal.make(partial(JoinLeave, fail_at=2), 2, backend="serial") as envs:
        envs.reset(seed=0)
        envs.step(np.ones(6, np.int64))
        with pytest.raises(errors.EnvError, match=r"env 0 \(join_leave_v0, rows 0-2\) raised ValueError in step\(\)"):
            envs.step(np.ones(6, np.int64))


def reset_and_step(envs, steps: int):
    """A seeded reset, then ``steps`` steps of zero actions; the last observations."""
    obs = envs.reset(seed=0)[0]
    for _ in range(steps):
        obs = envs.step(np.zeros(envs.num_envs, np.int64))[0]
    return obs


LIES = {  # kind of bad result -> what the error says after "for agent 'y' from reset() / step(): "
    "shape": r"observation: expected shape \(2,\) for Box\(0.0, 1.0, \(2,\), float32\), got an array of shape \(3,\)",
    "none": r"observation: expected a value of Box\(0.0, 1.0, \(2,\), float32\), got None",
    "complex": r"observation: expected numbers of dtype float32 .* got an array of shape \(2,\) and dtype complex64",
    "info": r"expected its info as a dict, got int 5",
    "reward": r"expected the reward as one real number, got str '1.0'",
    "flag": r"expected terminated as a bool \(or an int 0 or 1\), got int 2",
    "missing": r"an observation but no entry in rewards",
}


@pytest.mark.parametrize("config", SMALL_BACKENDS[:2])
@pytest.mark.parametrize(
    "bad_at, what",
    [(0, what) for what in ("shape", "none", "complex", "info")] + [(1, what) for what in LIES] +
    [(3, what) for what in ("shape", "flag")],
)
def test_bad_agent_outputs_name_env_and_agent(config, bad_at, what):
    """Every step's results are checked, not only the first's: at a reset, the first step and a later one."""
    during = "reset" if bad_at == 0 else "step"
    with shoal.make(partial(LiesAboutObs, bad_at=bad_at, what=what), 2, **config) as envs:
        message = rf"env 0 \(lies_v0, rows 0-1\) returned bad data for agent 'y' from {during}\(\): {LIES[what]}"
        with pytest.raises(errors.EnvOutputError, match=message):
            reset_and_step(envs, bad_at)


@pytest.mark.parametrize("config", SMALL_BACKENDS[:2])
def test_an_env_that_empties_its_agents_with_agents_not_done_is_named(config):
    """PettingZoo removes an agent from ``agents`` only once it is terminated or truncated; an env that empties the
    list while an agent it returned is neither would end that agent's row with no flag (a learner reads a transition
    into the next episode): refused, naming the env and the agent. Relay(vanish=True)'s episode 0 ends at step 2."""
    with shoal.make(partial(Relay, vanish=True), 2, **config) as envs:
        envs.reset(seed=[0, 3])
        envs.step(np.zeros(4, np.int64))
        message = (r"env 0 \(relay_v0, rows 0-1\) returned bad data for agent 'x' from step\(\): an observation with "
                   r"terminated and truncated both False, and then an empty agents list")
        with pytest.raises(errors.EnvOutputError, match=message) as err:
            envs.step(np.zeros(4, np.int64))
        assert err.value.env_id == 0
    with shoal.make(Relay, 2, **config) as envs:  # the same episodes, with their flags: they end and reset
        envs.reset(seed=[0, 3])
        envs.step(np.zeros(4, np.int64))
        obs, _, term, trunc, _ = envs.step(np.zeros(4, np.int64))
        assert term.tolist() == [True, True, False, False] and trunc.tolist() == [False, False, True, True]


@pytest.mark.parametrize("bad_at", [1, 3])
def test_step_results_that_are_not_five_dicts_are_named(bad_at):
    for what, got in [("list", r"got \(dict, list, dict, dict, dict\)"), ("four", "got a tuple of 4")]:
        with shoal.make(partial(LiesAboutObs, bad_at=bad_at, what=what), 2, backend="serial") as envs:
            reset_and_step(envs, bad_at - 1)
            message = (r"env 0 \(lies_v0, rows 0-1\) returned bad data from step\(\): expected five dicts "
                       r"\(observations, rewards, terminations, truncations, infos\), " + got)
            with pytest.raises(errors.EnvOutputError, match=message):
                envs.step(np.zeros(4, np.int64))


@pytest.mark.parametrize("bad_at, during", [(0, "reset"), (2, "step")])
def test_a_float_past_float32s_range_warns_as_numpy_does(bad_at, during):
    with shoal.make(partial(LiesAboutObs, bad_at=bad_at, what="far"), 2, backend="serial") as envs:
        with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
            obs = reset_and_step(envs, bad_at)
        assert obs[1].tolist() == [np.inf, 0.5] and obs[3].tolist() == [np.inf, 0.5]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            message = (rf"env 0 \(lies_v0, rows 0-1\) raised RuntimeWarning writing its rows from {during}\(\): "
                       r"overflow encountered in cast")
            with pytest.raises(errors.EnvError, match=message):
                reset_and_step(envs, bad_at)


@pytest.mark.parametrize("bad_at, during", [(0, "reset"), (2, "step")])
def test_an_agent_not_in_possible_agents_is_named(bad_at, during):
    with shoal.make(partial(LiesAboutObs, bad_at=bad_at, what="unknown"), 2, backend="serial") as envs:
        message = (rf"env 0 \(lies_v0, rows 0-1\) returned bad data for agent 'z' from {during}\(\): an agent not "
                   r"in possible_agents \['x', 'y'\]")
        with pytest.raises(errors.EnvOutputError, match=message):
            reset_and_step(envs, bad_at)


@pytest.mark.parametrize("config", SMALL_BACKENDS[:3])
def test_results_of_every_type_store_as_pettingzoo_returns_them(monkeypatch, config):
    """An env whose values take the C writer on some steps and the full checks on others (VariedAgents) gives the
    rows of the same env stepped by hand."""
    calls = {"slow": 0, "all": 0}
    fast, slow = PettingZooEngine._write_rows, PettingZooEngine._write_checked

    def count(which, method):
        def counted(self, *args):
            calls[which] += 1
            return method(self, *args)

        return counted

    monkeypatch.setattr(PettingZooEngine, "_write_rows", count("all", fast))
    monkeypatch.setattr(PettingZooEngine, "_write_checked", count("slow", slow))
    masks = run_beside(VariedAgents, 3, 40, config)
    assert not masks.all() and masks.any(axis=2).all()  # q left mid-episode; no env was ever empty
    if config["backend"] == "serial":  # (the counts are only seen in this process)
        assert 0 < calls["slow"] < calls["all"], calls


@pytest.mark.parametrize("config", SMALL_BACKENDS[:3])
@pytest.mark.parametrize("one_hot", [False, True], ids=["copies", "one-hot"])
def test_agents_of_different_spaces_flatten_as_gymnasium_flattens(monkeypatch, config, one_hot):
    """Rows of flattened observations (Box, Box 2-D, a Dict of Boxes; and a Discrete, one-hot, which only the full
    checks write) equal PettingZoo stepped by hand with Gymnasium's flatten, through padding and episode ends, with
    values the C writer takes at some steps and leaves to the full checks at others."""
    slow = []
    full = PettingZooEngine._write_checked
    monkeypatch.setattr(PettingZooEngine, "_write_checked", lambda self, *a: slow.append(a[0]) or full(self, *a))
    masks = run_beside(partial(Mixed, one_hot), 3, 20, config)
    assert not masks.all() and masks.any(axis=2).all()  # grid left mid-episode
    if config["backend"] == "serial":  # (only seen in this process)
        assert 0 < len(slow) < 3 * 21 if not one_hot else len(slow) == 3 * 21  # 3 envs, a reset and 20 steps


def test_a_step_writes_every_byte_of_its_rows():
    """Rows handed out as views (copy=False) that the caller overwrites come back whole: an agent's flattened
    observation and the zeros after it, and padding."""
    hand = ByHand(Mixed, 2)
    with shoal.make(Mixed, 2, backend="serial", copy=False) as envs:
        obs, _ = envs.reset(seed=1)
        hand.reset(1)
        for t in range(8):
            obs[:] = 7  # the caller's in-place work on the rows
            actions = np.array([t % 2] * 6)
            assert_rows(envs.step(actions), hand.step(actions), f"step {t}")


@pytest.mark.parametrize(
    "fn",
    [
        JoinLeave,
        DictJoinLeave,
        simple_adversary_v3.parallel_env,  # agents of different spaces: flattened
        simple_tag_v3.parallel_env,
        partial(simple_spread_v3.parallel_env, max_cycles=7),
        partial(pistonball_v6.parallel_env, max_cycles=7),
        partial(knights_archers_zombies_v11.parallel_env, line_death=True, max_cycles=30),
        rps_v2.parallel_env,  # rewards in a defaultdict (aec_to_parallel)
        tictactoe_v3.env,  # turn-based, converted
    ],
    ids=["join-leave", "dict-join-leave", "simple-adversary", "simple-tag", "simple-spread", "pistonball", "kaz", "rps",
         "tictactoe"],
)
def test_well_behaved_multiagent_envs_never_take_the_slow_path(monkeypatch, fn):
    slow = []
    monkeypatch.setattr(PettingZooEngine, "_write_checked", lambda self, e, *args: slow.append(e))
    with warnings.catch_warnings(), shoal.make(fn, 2, backend="serial") as envs:
        warnings.simplefilter("ignore")  # tictactoe warns of illegal random moves
        envs.reset(seed=0)
        for _ in range(40):
            envs.step(envs.action_space.sample())
    assert slow == []


def test_bad_action_rows_are_typed_errors():
    with shoal.make(JoinLeave, 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.ActionError, match=r"expected shape \(6,\), got \(2,\)"):
            envs.step(np.ones(2, np.int64))
        with pytest.raises(errors.ActionError, match=r"outside \[0, 3\]"):
            envs.step(np.full(6, 4))


def test_a_pettingzoo_instance_or_a_mix_says_what_to_pass():
    with pytest.raises(errors.ConfigError, match=r"is a PettingZoo ParallelEnv .* when given a callable"):
        shoal.make(JoinLeave(), 2)
    import gymnasium as gym

    with pytest.raises(errors.ConfigError, match=r"one vector env holds one kind of env"):
        shoal.make([lambda: gym.make("CartPole-v1"), JoinLeave], backend="serial")


def test_seed_forms():
    with shoal.make(JoinLeave, 2, backend="serial") as envs:
        assert envs.reset(seed=7)[0][[0, 3], 0].tolist() == [7, 8]  # env e gets seed + e
        assert envs.reset(seed=[5, 9])[0][[0, 3], 0].tolist() == [5, 9]  # one per env
        assert envs.reset(seed=[5, 6, 6, 9, 1, 1])[0][[0, 3], 0].tolist() == [5, 9]  # per row: the first row's
        with pytest.raises(errors.ResetArgumentError, match=r"expected 2 seeds \(one per env\), got 3"):
            envs.reset(seed=[1, 2, 3])


def test_structured_observations_pad_with_zero_records():
    with shoal.make(DictJoinLeave, 2, backend="serial") as envs:
        obs, info = envs.reset(seed=7)
        for _ in range(3):
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
        np.testing.assert_array_equal(obs["obs"][:3], table_obs(NEXT_STEP_TABLE[2][0]))  # b is padding at step 3
        np.testing.assert_array_equal(obs["pair"][0][:3], [0, 0, 2])
        np.testing.assert_array_equal(obs["pair"][1][:3], [1, 0, 0])


def test_envs_whose_agents_differ_from_env_0s_are_refused():
    class Wider(JoinLeave):
        def action_space(self, agent):
            return spaces.Discrete(5)

    message = r"env 1 agent 'a' has observation space .* Discrete\(5\); env 0"
    with pytest.raises(errors.SpaceMismatchError, match=message):
        shoal.make([JoinLeave, Wider], backend="serial")
