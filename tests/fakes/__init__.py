"""Test envs, in one place. Importable by name by spawned workers and Ray's actors (tests/ is on sys.path, which spawn
passes on; the Ray tests put it on the actors' PYTHONPATH):

- ``fakes.envs``: Gymnasium envs whose outputs the tests compare (every space, loose spaces, infos);
- ``fakes.varied``: envs whose results come as values of every type an env may return;
- ``fakes.faults``: envs that are slow, fail or return bad data, and the hostings their tests run on;
- ``fakes.batch``: batch-native envs;
- ``fakes.multiagent``: PettingZoo envs;
- ``fakes.native``: native PufferLib envs (it imports pufferlib).
"""
