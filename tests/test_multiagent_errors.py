"""Multi-agent envs that fail or return bad data, and bad input from the user: typed errors naming the env, its rows and
the agent, what was expected and what came."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest
from gymnasium import spaces

import shoal
from fakes.multiagent import JoinLeave, LiesAboutObs, Relay, rps_raising
from shoal import errors
from test_multiagent import SMALL_BACKENDS


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


@pytest.mark.parametrize("config", SMALL_BACKENDS[:2])
def test_results_not_in_pettingzoos_form_are_named(config):
    """A reset that returns the observations alone (PettingZoo's reset before 1.22), and one whose infos are a list
    (a step's are refused with the other four results' types: test_step_results_that_are_not_five_dicts_are_named)."""
    for bad_at, what, message in [
        (0, "obs only", r"from reset\(\): expected \(observations, infos\) dicts, got dict"),
        (0, "infos list", r"from reset\(\): expected infos as a dict of dicts by agent, got list"),
    ]:
        with shoal.make(partial(LiesAboutObs, bad_at=bad_at, what=what), 2, **config) as envs:
            with pytest.raises(errors.EnvOutputError, match=r"env 0 \(lies_v0, rows 0-1\) .*" + message):
                reset_and_step(envs, bad_at)


def test_possible_agents_that_cannot_be_rows_are_refused():
    class Nobody(LiesAboutObs):
        possible_agents: list[str] = []

    class Twice(LiesAboutObs):
        possible_agents = ["x", "y", "x"]

    class OnlyX(LiesAboutObs):
        possible_agents = ["x"]

    with pytest.raises(errors.ConfigError, match=r"has no possible_agents; shoal gives each possible agent a row"):
        shoal.make(Nobody, 2, backend="serial")
    with pytest.raises(errors.ConfigError, match=r"possible_agents lists an agent twice: \['x', 'y', 'x'\]"):
        shoal.make(Twice, 2, backend="serial")
    with pytest.raises(errors.SpaceMismatchError, match=r"env 1 has possible_agents \['x'\], env 0 has \['x', 'y'\]"):
        shoal.make([LiesAboutObs, OnlyX], backend="serial")


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


def test_envs_whose_agents_differ_from_env_0s_are_refused():
    class Wider(JoinLeave):
        def action_space(self, agent):
            return spaces.Discrete(5)

    message = r"env 1 agent 'a' has observation space .* Discrete\(5\); env 0"
    with pytest.raises(errors.SpaceMismatchError, match=message):
        shoal.make([JoinLeave, Wider], backend="serial")
