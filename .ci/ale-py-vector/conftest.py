"""ale-py's pool is shoal's for this suite (the test files are ale-py's, unpacked from its source release at run time).

ale-py's ``tests/python/test_atari_vector_env.py`` builds its pool with ``gym.make_vec("ALE/Breakout-v5", ...)``;
:func:`shoal.ale_py.register_vector_envs` makes that build :class:`shoal.ale_py.AtariVectorEnv`, as a user's
program would (``.ci/shoal_built.py`` checks that shoal vector envs were built). The Gymnasium envs it compares
against stay ale-py's own ``AtariEnv``.
"""

from __future__ import annotations

import shoal.ale_py

shoal.ale_py.register_vector_envs()
