"""The sanity suite: batch-native and single-instance envs agree; optimal and random returns are what the suite
says; the example PPO solves the envs it can solve in seconds; planted bugs are caught; `shoal sanity` reports."""

import contextlib
import functools
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import shoal
from helpers import assert_same
from shoal.batch import compare
from shoal.cli import main
from shoal.errors import ConfigError
from shoal.sanity import IDS, native, single
from shoal.sanity.suite import SUITE, evaluate, stochastic_optimum, stochastic_return

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("env_id", [i for i in IDS if i != "shoal/Multiagent-v0"])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_batch_native_equals_single_instance(env_id, mode):
    ended = compare(env_id, lambda: gym.make(env_id), 12, steps=150, seed=4, autoreset_mode=mode)
    assert ended >= 12  # every env went through episode ends and resets


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("backend", [{"backend": "serial"}, {"backend": "multiprocessing", "num_workers": 2}])
def test_multiagent_rows_equal_its_pettingzoo_twin_and_its_joint_gymnasium_env(mode, backend):
    pytest.importorskip("pettingzoo")
    from shoal.sanity.parallel import MultiagentParallel

    n, rng = 4, np.random.default_rng(0)
    joint = gym.vector.SyncVectorEnv([lambda: gym.make("shoal/Multiagent-v0")] * n,
                                     autoreset_mode=gym.vector.AutoresetMode[mode.upper()])
    with (
        shoal.make("shoal/Multiagent-v0", n, autoreset_mode=mode, **backend) as rows,
        shoal.make(MultiagentParallel, n, backend="serial", autoreset_mode=mode) as twin,
        contextlib.closing(joint),
    ):
        assert rows.possible_agents == twin.possible_agents == ["agent_0", "agent_1"] and rows.num_envs == 2 * n
        mine, theirs, both = rows.reset(seed=4), twin.reset(seed=4), joint.reset(seed=4)
        for step in range(20):
            assert_same(mine, theirs, f"step {step}")
            np.testing.assert_array_equal(both[0].reshape(2 * n, 2), mine[0])
            actions = rng.integers(0, 2, 2 * n)
            mine, theirs, both = rows.step(actions), twin.step(actions), joint.step(actions.reshape(n, 2))
            np.testing.assert_array_equal(both[1], mine[1].reshape(n, 2).mean(axis=1))
            np.testing.assert_array_equal(both[2], mine[2][::2])


@pytest.mark.parametrize("agents", [2, 3])
@pytest.mark.parametrize("flag", ["terminations", "truncations"])
def test_a_multiagent_batch_env_whose_agents_end_apart_is_named(agents, flag):
    from shoal.batch import BatchEnv
    from shoal.errors import EnvOutputError

    class Apart(BatchEnv):
        possible_agents = tuple("abc"[:agents])
        single_observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
        single_action_space = gym.spaces.Discrete(2)

        def reset(self, ids, seeds, out):
            out.obs[:] = 0

        def step(self, ids, actions, out):
            out.obs[:] = 0
            getattr(out, flag)[:] = ids % agents == agents - 1  # every env's last agent alone ...
            out.terminations[:agents] = True  # ... but env 0's, whose agents all end
            out.terminations[-agents:] = False  # ... and env 2's, whose agents go on together
            out.truncations[-agents:] = False

    with shoal.make(Apart, 3, backend="serial") as envs:
        envs.reset(seed=0)
        lone = ", ".join(["False"] * (agents - 1) + ["True"])
        with pytest.raises(EnvOutputError, match=rf"Apart: the agents of env 1 \(rows {agents}\.\.{2 * agents - 1}\) "
                                                 rf"ended their episode apart \(\[{lone}\]\)"):
            envs.step(np.zeros(3 * agents, np.int64))


def test_settings_other_than_the_defaults_agree_too():
    for env_id, kwargs in [("Squared", {"distance": 3, "num_targets": 6}), ("Password", {"password": (1, 1, 0)}),
                           ("Stochastic", {"p": 0.6, "horizon": 7}), ("Memory", {"length": 3, "delay": 2}),
                           ("Bandit", {"means": (0.9, 0.1, 0.3)})]:
        compare(functools.partial(getattr(native, env_id), **kwargs), lambda: getattr(single, env_id)(**kwargs), 6,
                steps=80, seed=1)


@pytest.mark.parametrize("env_id", IDS)
def test_scripted_policy_is_optimal_and_random_is_not(env_id):
    entry = SUITE[env_id]
    stochastic = env_id in ("shoal/Stochastic-v0", "shoal/Bandit-v0")
    scripted = evaluate(entry.scripted(), env_id, episodes=4000)
    assert scripted == pytest.approx(entry.optimal, abs=0.02 * entry.optimal if stochastic else 1e-9)
    with shoal.make(env_id, 256, backend="serial") as envs:
        space = envs.action_space
    space.seed(0)
    random = evaluate(lambda obs, starts: space.sample(), env_id, episodes=20000)
    assert random == pytest.approx(entry.random, abs=0.03 * max(1.0, abs(entry.random)))
    assert random < 0.9 * entry.optimal


def test_stochastic_returns_by_formula_match_the_env_stepped_by_hand():
    env = single.Stochastic()
    rng = np.random.default_rng(0)
    for q in (0.5, 0.7, 0.9):
        total, episodes = 0.0, 3000
        for _ in range(episodes):
            env.reset()
            done = False
            while not done:
                _, r, done, _, _ = env.step(int(rng.random() >= q))
                total += r
        assert total / episodes == pytest.approx(stochastic_return(q), rel=0.02)
    q, best = stochastic_optimum()
    assert 0.6 < q < 0.75 and best > stochastic_return(0.75) > stochastic_return(0.5)


def test_ids_are_registered_with_gymnasium_and_bad_settings_are_refused():
    for env_id in IDS:
        env = gym.make(env_id)
        env.reset(seed=0)
        env.close()
    with pytest.raises(ConfigError, match="num_targets=20 is more than the 16 cells"):
        shoal.make("shoal/Squared-v0", 2, backend="serial", num_targets=20)
    with pytest.raises(ConfigError, match="password must be a non-empty sequence of 0s and 1s"):
        single.Password(password=(0, 2))
    with pytest.raises(ConfigError, match=r"p must be in \(0, 1\)"):
        native.Stochastic(2, p=1.0)


# -- the example PPO and the bugs it can have -------------------------------------------------------------------


@pytest.fixture(scope="module")
def example():
    pytest.importorskip("torch")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import ppo_sanity
        import sanity_bugs
    finally:
        sys.path.remove(str(EXAMPLES))
    return ppo_sanity, sanity_bugs


QUICK = ["shoal/Bandit-v0", "shoal/Multiagent-v0", "shoal/Spaces-v0", "shoal/Memory-v0"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("env_id", QUICK)
def test_example_ppo_solves_the_quick_envs(example, env_id):
    ppo_sanity, _ = example
    policy = ppo_sanity.train(env_id, seed=1)
    assert evaluate(policy, env_id, episodes=1000) >= 0.9 * SUITE[env_id].optimal


@pytest.mark.timeout(300)
@pytest.mark.parametrize("bug, env_id", [("obs-action-off-by-one", "shoal/Spaces-v0"),
                                         ("first-head-only", "shoal/Spaces-v0"),
                                         ("greedy-rollouts", "shoal/Bandit-v0"),
                                         ("reward-off-by-one", "shoal/Multiagent-v0")])
def test_planted_bugs_are_caught(example, tmp_path, bug, env_id):
    _, sanity_bugs = example
    planted = next(b for b in sanity_bugs.BUGS if b.name == bug)
    assert env_id in planted.caught_by
    report = sanity_bugs.run(planted, (env_id,), tmp_path)
    assert not report.results[0].solved, report.results[0]


def test_a_bug_whose_line_is_gone_is_an_error(example, tmp_path):
    _, sanity_bugs = example
    ghost = sanity_bugs.Bug("ghost", "a line that is not there", "no such line", "x", ())
    with pytest.raises(ValueError, match="is in ppo_sanity.py 0 times"):
        sanity_bugs.planted(ghost, tmp_path)


# -- the command --------------------------------------------------------------------------------------------------

AGENTS = '''
import numpy as np
from shoal.sanity.suite import SUITE

def scripted(env_id, total_steps, seed):
    return SUITE[env_id].scripted()

def constant(env_id, total_steps, seed):
    return lambda obs, starts: np.zeros(len(starts), np.int64)
'''


def test_shoal_sanity_reports_solved_and_unsolved_envs(tmp_path, capsys):
    agents = tmp_path / "agents.py"
    agents.write_text(AGENTS)
    out = tmp_path / "out"
    status = main(["sanity", "--agent", f"{agents}:scripted", "--envs", "Squared,password,shoal/Memory-v0",
                   "--episodes", "200", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0 and "solved 3 of 3" in printed
    report = json.loads((out / "sanity.json").read_text())
    assert [r["env_id"] for r in report["results"]] == ["shoal/Squared-v0", "shoal/Password-v0", "shoal/Memory-v0"]
    assert all(r["solved"] and r["fraction"] == pytest.approx(1.0) for r in report["results"])
    assert (out / "sanity.png").stat().st_size > 10_000

    status = main(["sanity", "--agent", f"{agents}:constant", "--envs", "Bandit,Memory", "--episodes", "200",
                   "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 1 and "solved 0 of 2" in printed and "NO" in printed


def test_shoal_sanity_refuses_bad_agents_in_one_line(tmp_path, capsys):
    assert main(["sanity", "--agent", "nowhere.py:train", "--out", str(tmp_path)]) == 2
    assert "agent file 'nowhere.py' does not exist" in capsys.readouterr().err
    assert main(["sanity", "--agent", "json:nothing_here", "--out", str(tmp_path)]) == 2
    assert "'json' has no function 'nothing_here'" in capsys.readouterr().err
    agents = tmp_path / "agents.py"
    agents.write_text(AGENTS)
    assert main(["sanity", "--agent", f"{agents}:scripted", "--envs", "Nope", "--out", str(tmp_path)]) == 2
    assert "not sanity envs: ['Nope']" in capsys.readouterr().err
