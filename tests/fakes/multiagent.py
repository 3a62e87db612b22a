"""Multi-agent (PettingZoo) envs: agents that join and leave, results of every type, bad results."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils import BaseWrapper

JOIN_LEAVE_OBS = spaces.Box(-(10**6), 10**6, (3,), np.int64)
JOIN_LEAVE_SCRIPT = {  # step -> (agents leaving at that step: (agent, "term" | "trunc"), agents joining after it)
    2: ([("b", "term")], []),
    3: ([], ["c"]),
    5: ([("a", "term")], []),
    6: ([("c", "trunc")], []),
}


class JoinLeave(ParallelEnv):
    """A scripted variable population. Agents ``a`` and ``b`` start; ``b`` terminates at step 2; ``c`` joins after
    step 2 (its first observation, reward 0, comes with step 3); ``a`` terminates at step 5; ``c`` truncates at step
    6, which ends the episode. An agent's observation is ``[base + t, agent number, its last action]`` (``base``: the
    reset seed, or the last base + 1000 without one); its reward ``10 * t + action``; its info ``{"t": t}``
    (``{"hello": number}`` at reset). ``fail_at``: the step that raises ``ValueError``."""

    metadata = {"name": "join_leave_v0"}
    possible_agents = ["a", "b", "c"]
    render_mode = None

    def __init__(self, fail_at=None):
        self.fail_at = fail_at
        self.base = 0
        self.agents = []

    def observation_space(self, agent):
        return JOIN_LEAVE_OBS

    def action_space(self, agent):
        return spaces.Discrete(4)

    def _obs(self, agent, action=0):
        return np.array([self.base + self.t, "abc".index(agent), action], np.int64)

    def reset(self, seed=None, options=None):
        self.base = seed if seed is not None else self.base + 1000
        self.t = 0
        self.agents = ["a", "b"]
        return {a: self._obs(a) for a in self.agents}, {a: {"hello": "abc".index(a)} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.t == self.fail_at:
            raise ValueError(f"scripted failure at step {self.t}")
        leaving, joining = JOIN_LEAVE_SCRIPT.get(self.t, ([], []))
        obs = {a: self._obs(a, int(actions[a])) for a in self.agents}
        rewards = {a: float(10 * self.t + int(actions[a])) for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: False for a in self.agents}
        infos = {a: {"t": self.t} for a in self.agents}
        for agent, how in leaving:
            (terms if how == "term" else truncs)[agent] = True
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])] + joining
        for agent in joining:  # a joining agent's first observation comes with this step, reward 0
            obs[agent], rewards[agent], infos[agent] = self._obs(agent), 0.0, {"t": self.t}
            terms[agent] = truncs[agent] = False
        return obs, rewards, terms, truncs, infos


class DictJoinLeave(JoinLeave):
    """:class:`JoinLeave` with Dict observations: ``{"obs": its observation, "pair": (agent number, action % 2)}``
    (Python ints for the Discrete leaves)."""

    def observation_space(self, agent):
        return spaces.Dict({"obs": JOIN_LEAVE_OBS, "pair": spaces.Tuple((spaces.Discrete(3), spaces.Discrete(2)))})

    def _obs(self, agent, action=0):
        return {"obs": super()._obs(agent, action), "pair": ("abc".index(agent), action % 2)}


class MoveRaises(BaseWrapper):
    """An AEC env whose ``agent``'s step raises ``ValueError`` on action ``action``."""

    def __init__(self, env, agent, action):
        super().__init__(env)
        self.bad = (agent, action)

    def step(self, action):
        if (self.agent_selection, action) == self.bad:
            raise ValueError(f"illegal move {action}")
        super().step(action)


def rps_raising():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PettingZoo deprecates importing an env module
        from pettingzoo.classic import rps_v2

    return MoveRaises(rps_v2.env(), "player_1", 2)


class LiesAboutObs(ParallelEnv):
    """Agent ``y``'s results are bad at step ``bad_at`` (0: at reset), of kind ``what``: ``shape`` (an observation of
    shape (3,)), ``none`` (None as its observation), ``complex``, ``info`` (its info 5), ``unknown`` (an observation
    of an agent ``z`` too), ``reward`` (a str), ``flag`` (terminated 2), ``missing`` (no reward entry), ``list``
    (rewards as a list), ``four`` (four results, no truncations), ``infos list`` (infos as a list), ``obs only`` (a
    reset that returns the observations alone, as PettingZoo's reset did before 1.22); or ``far``, a
    float64 past float32's range (not bad: numpy stores inf and warns)."""

    metadata = {"name": "lies_v0"}
    possible_agents = ["x", "y"]

    def __init__(self, bad_at=1, what="shape"):
        self.bad_at, self.what = bad_at, what

    def observation_space(self, agent):
        return spaces.Box(0, 1, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _results(self):
        obs = {a: np.zeros(2, np.float32) for a in self.agents}
        rewards, terms, truncs = ({a: value for a in self.agents} for value in (0.0, False, False))
        infos = {a: {} for a in self.agents}
        if self.t == self.bad_at:
            bad = {"shape": np.zeros(3, np.float32), "none": None, "complex": np.zeros(2, np.complex64),
                   "far": np.array([1e300, 0.5])}
            if self.what in bad:
                obs["y"] = bad[self.what]
            elif self.what == "info":
                infos["y"] = 5
            elif self.what == "unknown":
                obs["z"] = np.zeros(2, np.float32)
            elif self.what == "reward":
                rewards["y"] = "1.0"
            elif self.what == "flag":
                terms["y"] = 2
            elif self.what == "missing":
                del rewards["y"]
            elif self.what == "list":
                return obs, [0.0] * len(self.agents), terms, truncs, infos
            elif self.what == "four":
                return obs, rewards, terms, infos
            elif self.what == "infos list":
                return obs, rewards, terms, truncs, [infos[a] for a in self.agents]
        return obs, rewards, terms, truncs, infos

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        obs, *_, infos = self._results()
        return obs if self.bad_at == 0 and self.what == "obs only" else (obs, infos)

    def step(self, actions):
        self.t += 1
        return self._results()


VARIED_OBS = [
    lambda x: np.full(3, x, np.float32),
    lambda x: np.full(3, x + 1 / 3),  # float64 for float32 (rounded as numpy casts)
    lambda x: [x, x + 0.5, -x],  # a list (the slow path)
    lambda x: np.full(6, x, np.float32)[::2],  # strided (the slow path)
    lambda x: np.full(3, int(x), np.int64),  # ints (the slow path)
    lambda x: np.full(3, x, ">f4"),  # big-endian (the slow path)
]
VARIED_REWARDS = [1.5, -2, True, np.float64(0.125), np.float32(0.3), np.int64(7), np.bool_(True), np.float16(0.5)]
VARIED_FLAGS = [False, np.bool_(False), 0, np.int64(0)]  # none of them ends an episode


class Mixed(ParallelEnv):
    """Agents of different observation spaces, which shoal flattens into rows of one length: ``box`` a Box (2,),
    ``grid`` a Box (2, 3), ``nest`` a Dict of a Box (1,) and a Box (2, 2) (and with ``one_hot``, ``pick`` a
    Discrete(3), which flattens one-hot). Values are float32 arrays, and at some steps float64 arrays or lists, nested
    for more dims (the C writer takes those too), or big-endian arrays (the slow path); ``grid`` terminates at step 3
    and the episode is truncated at step 6."""

    metadata = {"name": "mixed_v0"}
    SPACES = {
        "box": spaces.Box(-9, 9, (2,), np.float32),
        "grid": spaces.Box(-9, 9, (2, 3), np.float32),
        "nest": spaces.Dict({"a": spaces.Box(-9, 9, (1,), np.float32), "b": spaces.Box(-9, 9, (2, 2), np.float32)}),
        "pick": spaces.Discrete(3),
    }

    def __init__(self, one_hot=False):
        self.possible_agents = list(self.SPACES) if one_hot else ["box", "grid", "nest"]
        self.agents = []

    def observation_space(self, agent):
        return self.SPACES[agent]

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _value(self, agent, x):
        kind = (self.t + len(agent)) % 4  # 0: big-endian, 1: float64, 2: a list, 3: float32
        as_kind = [lambda a: a.astype(">f4"), lambda a: a.astype(np.float64), lambda a: a.tolist(), lambda a: a][kind]
        if agent == "nest":
            b = np.arange(4, dtype=np.float32).reshape(2, 2) + x
            return {"a": as_kind(np.full(1, x, np.float32)), "b": as_kind(b)}
        if agent == "pick":
            return int(x) % 3
        return as_kind(np.arange(int(np.prod(self.SPACES[agent].shape)), dtype=np.float32).reshape(
            self.SPACES[agent].shape) + x)

    def _obs(self, actions=None):
        return {a: self._value(a, self.base + self.t + (int(actions[a]) if actions else 0)) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.base = 0 if seed is None else seed % 5
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = self._obs(actions)
        rewards = {a: float(self.t) for a in self.agents}
        terms = {a: a == "grid" and self.t == 3 for a in self.agents}
        truncs = {a: self.t == 6 for a in self.agents}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, {a: {} for a in obs}


class _Keys(dict):
    """A dict subclass of its own (the C writer leaves it to the full checks)."""


class VariedAgents(ParallelEnv):
    """Three agents whose results come in every type an env may return, changing from step to step and agent to
    agent: observations as float32 and float64 arrays, lists, strided, int and big-endian arrays; rewards of every
    real type; flags as Python and numpy bools and ints 0 and 1; results' dicts as dicts, defaultdicts and a dict
    subclass; an agent's info missing at times. Agent ``q`` leaves at step 4 (terminated, as a numpy bool) and the
    episode ends at step 9 (truncated, as an int 1)."""

    metadata = {"name": "varied_agents_v0"}
    possible_agents = ["p", "q", "r"]

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.base = 0 if seed is None else seed
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: VARIED_OBS[0](self.base + k) for k, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(self, actions):
        import collections

        self.t += 1
        t, n = self.t, self.base + self.t
        obs, terms, truncs, infos = {}, {}, {}, {}
        rewards: dict = collections.defaultdict(float) if n % 2 else {}
        for k, agent in enumerate(self.agents):
            obs[agent] = VARIED_OBS[(n + k) % len(VARIED_OBS)](n + k + int(actions[agent]))
            rewards[agent] = VARIED_REWARDS[(n + 2 * k) % len(VARIED_REWARDS)]
            terms[agent] = VARIED_FLAGS[(n + k) % len(VARIED_FLAGS)]
            truncs[agent] = VARIED_FLAGS[(n + k + 1) % len(VARIED_FLAGS)]
            if (n + k) % 3:
                infos[agent] = {"t": t}
        if t == 4 and "q" in terms:
            terms["q"] = np.bool_(True)
        if t == 9:
            truncs = dict.fromkeys(truncs, 1)
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return (_Keys(obs) if n % 5 == 0 else obs), rewards, terms, truncs, infos


class Chatter(ParallelEnv):
    """Two agents whose observation has a Text leaf (loose: not in the shared records) beside a Box; every episode
    ends at step ``length``. Agent ``k``'s observation at step ``t`` of episode ``n``: ``{"said": f"{n}:{t}:{k}",
    "t": [t]}``; its info ``{"t": t}`` (``keep_infos``: the dicts it keeps, which a reset sets to ``{"t": 0}``)."""

    metadata = {"name": "chatter_v0"}
    possible_agents = ["a", "b"]
    SPACE = spaces.Dict({"said": spaces.Text(12, charset="0123456789:"), "t": spaces.Box(0, 99, (1,), np.int64)})

    def __init__(self, length=3, keep_infos=False):
        self.length, self.episode, self.t, self.agents = length, -1, 0, []
        self.kept = {a: {} for a in self.possible_agents} if keep_infos else None

    def observation_space(self, agent):
        return self.SPACE

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: {"said": f"{self.episode}:{self.t}:{k}", "t": np.array([self.t])} for k, a in enumerate(self.agents)}

    def reset(self, seed=None, options=None):
        self.episode, self.t, self.agents = self.episode + 1, 0, list(self.possible_agents)
        if self.kept is not None:
            for info in self.kept.values():
                info["t"] = 0
            return self._obs(), self.kept
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        over = self.t >= self.length
        obs = self._obs()
        infos = {a: {"t": self.t} for a in self.agents}
        if self.kept is not None:
            for a in self.agents:
                self.kept[a]["t"] = self.t
            infos = self.kept
        flags = {a: False for a in self.agents}
        return obs, {a: 1.0 for a in self.agents}, {a: over for a in self.agents}, flags, infos


class Relay(ParallelEnv):
    """Two agents, ``x`` and ``y``, with Box observations ``[episode, t, agent number, last action]`` and rewards
    ``t * (agent number + 1) + action``. Episode ``n`` (the reset seed, or one more than the last) ends at step
    ``2 + n % 3``, terminated where ``n`` is even and truncated where odd. Step infos are ``{"t": t, "agent": k}``,
    reset infos ``{"t": -1, "episode": n}`` (``t`` in both, so the order in which they are merged shows). With
    ``leave``, ``y`` terminates at step 1 of every episode (for SuperSuit's ``black_death_v3``); with ``vanish``, the
    episode ends with its agents list emptied but neither agent terminated nor truncated."""

    metadata = {"name": "relay_v0"}
    possible_agents = ["x", "y"]
    render_mode = None

    def __init__(self, leave: bool = False, vanish: bool = False) -> None:
        self.leave, self.vanish, self.episode, self.t, self.agents = leave, vanish, -1, 0, []
        self.closed = False

    def close(self):
        self.closed = True

    def observation_space(self, agent):
        return spaces.Box(-1, 1e6, (4,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self, k, action=0):
        return np.array([self.episode, self.t, k, action], np.float32)

    def reset(self, seed=None, options=None):
        self.episode = seed if seed is not None else self.episode + 1
        self.t, self.agents = 0, list(self.possible_agents)
        ks = {a: k for k, a in enumerate(self.possible_agents)}
        return {a: self._obs(k) for a, k in ks.items()}, {a: {"t": -1, "episode": self.episode} for a in ks}

    def step(self, actions):
        self.t += 1
        ks = {a: self.possible_agents.index(a) for a in self.agents}
        over = self.t >= 2 + self.episode % 3
        obs = {a: self._obs(k, int(actions[a])) for a, k in ks.items()}
        rewards = {a: float(self.t * (k + 1) + int(actions[a])) for a, k in ks.items()}
        terms = {a: over and self.episode % 2 == 0 and not self.vanish for a in ks}
        truncs = {a: over and self.episode % 2 == 1 and not self.vanish for a in ks}
        if self.leave and self.t == 1 and "y" in terms:
            terms["y"] = True
        infos = {a: {"t": self.t, "agent": k} for a, k in ks.items()}
        self.agents = [] if over and self.vanish else [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos


class LateJoiner(ParallelEnv):
    """Agent ``b`` joins at the first step: at a reset its row is PufferLib's padding, zeros, which lie outside the
    agents' observation space ([1, 9]); every agent leaves at step 4."""

    metadata = {"name": "late_joiner_v0"}
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return spaces.Box(1, 9, (2,), np.int64)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, ["a"]
        return {"a": np.array([1, 1])}, {"a": {}}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([1 + self.t, 1 + int(actions.get(a, 0))]) for a in ("a", "b")}
        over = self.t >= 4
        self.agents = [] if over else ["a", "b"]
        return obs, dict.fromkeys(obs, 1.0), dict.fromkeys(obs, over), dict.fromkeys(obs, False), {a: {} for a in obs}
