"""Multi-agent environments (PettingZoo) vectorized with agents as rows.

``shoal.make(parallel_env_fn, num_envs)`` builds a :class:`MultiAgentVectorEnv`: each of the ``num_envs`` PettingZoo
envs contributes one row per possible agent, so a learning library sees ``num_envs * len(possible_agents)`` envs of
one observation and action space (:mod:`shoal.multiagent.rows` says how agents with different spaces share one).

Rules, per row (env ``e``, agent ``k``: row ``e * A + k``, ``A = len(possible_agents)``, PettingZoo's order):

* A live row (its agent returned an observation this step) holds the agent's observation, reward, terminated,
  truncated and info; ``info["agent_mask"]`` is True.
* A padding row (the agent has not joined, has finished, or was removed) holds observation zeros, reward 0,
  ``terminated`` True, ``truncated`` False, no info entries, ``info["agent_mask"]`` False; its action is ignored (but
  must still be a valid action of the row space). ``terminated`` True on padding means a learner that cuts
  bootstrapping at ``terminated`` never bootstraps through an absent agent, and with next-step autoreset the row
  of an agent that joins reads like the first step of a new episode.
* An env's episode ends when it has no live agents left: every agent it returned terminated or truncated (or it
  returned none). Autoreset then applies to the whole env, on every row, in any autoreset mode; an agent that
  finishes earlier is padding until then. An env that empties its ``agents`` list while an agent it returned in that
  step is neither terminated nor truncated is an ``EnvOutputError`` naming the env and the agent (PettingZoo's API
  forbids it, and the agent's row would end its episode with no flag).
* Seeds are per env (``reset(seed=s)`` gives env ``e`` the seed ``s + e``; a list has one seed per env, or one per
  row, of which each env takes its first row's); ``reset_mask`` selects whole envs (one
  bool per env, or per row with all of an env's rows alike); an asynchronous batch (``batch_size``) is whole envs.
* ``call``/``get_attr`` run once per env and give each of its rows the result; ``set_attr`` gives each env the value
  of its first row.
* Action sequences (``step(list_of_arrays)``) are refused: an env's agents step together.
"""

from shoal.multiagent.engine import EXTRAS, as_parallel, is_pettingzoo
from shoal.multiagent.rows import AgentRows
from shoal.multiagent.vector import MultiAgentVectorEnv, build

__all__ = ["AgentRows", "EXTRAS", "MultiAgentVectorEnv", "as_parallel", "build", "is_pettingzoo"]
