"""Multi-agent (PettingZoo) envs with agents as rows: equal to the same envs stepped by hand, on every backend.
Agents that join and leave: test_multiagent_population.py; errors: test_multiagent_errors.py."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest
from gymnasium import spaces

import shoal
from fakes.multiagent import JOIN_LEAVE_OBS, DictJoinLeave, JoinLeave, Mixed, VariedAgents
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


@pytest.mark.parametrize("config", SMALL_BACKENDS[:2])
def test_envs_of_pettingzoos_registry(config):
    """PettingZoo 1.27's ``pettingzoo.make`` (its module imports, as above, now warn that they are deprecated)."""
    import pettingzoo

    if not hasattr(pettingzoo, "make"):
        pytest.skip(f"PettingZoo {pettingzoo.__version__} has no registry (it came with 1.27)")
    run_beside(partial(pettingzoo.make, "parallel", "butterfly/pistonball-v6", max_cycles=4), 2, 9, config)
    run_beside(partial(pettingzoo.make, "aec", "classic/rps-v2"), 2, 8, config, convert=aec_to_parallel)


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


def test_seed_forms():
    with shoal.make(JoinLeave, 2, backend="serial") as envs:
        assert envs.reset(seed=7)[0][[0, 3], 0].tolist() == [7, 8]  # env e gets seed + e
        assert envs.reset(seed=[5, 9])[0][[0, 3], 0].tolist() == [5, 9]  # one per env
        assert envs.reset(seed=[5, 6, 6, 9, 1, 1])[0][[0, 3], 0].tolist() == [5, 9]  # per row: the first row's
        with pytest.raises(errors.ResetArgumentError, match=r"expected 2 seeds \(one per env\), got 3"):
            envs.reset(seed=[1, 2, 3])
