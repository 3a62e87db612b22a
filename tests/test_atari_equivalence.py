"""shoal's Atari env against Gymnasium's AtariPreprocessing + FrameStackObservation, step for step.

Observations are compared bit for bit (no tolerance: shoal's resize kernel rounds exactly as OpenCV's INTER_AREA),
with rewards, terminations, truncations, lives and frame numbers, on mixed ROMs whose action sets differ. Short
frame limits force truncations (and episodic life forces terminations) so that autoresets are exercised.
"""

import pytest

from atari_reference import compare_rollout

GAMES = ["pong", "breakout", "space_invaders", "ms_pacman"]


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param({"backend": "serial"}, id="serial"),
        pytest.param({"backend": "multiprocessing", "num_workers": 2}, id="mp-inline"),
        pytest.param(
            {"backend": "multiprocessing", "num_workers": 2, "inline": False, "context": "spawn"}, id="mp-spawn"
        ),
    ],
)
def test_gray_84_next_step_on_every_backend(backend):
    assert compare_rollout(GAMES, steps=220, seed=3, max_frames=600, **backend) >= 4


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(dict(autoreset_mode="same_step", max_frames=500), id="same-step"),
        pytest.param(
            dict(autoreset_mode="same_step", episodic_life=True, grayscale=False, size=(64, 48), stack=2, frameskip=3),
            id="rgb-64x48-stack2-skip3-episodic-same-step",
        ),
        pytest.param(
            dict(episodic_life=True, size=(210, 160), stack=3, frameskip=1, max_frames=300),
            id="full-size-skip1-episodic",
        ),
        pytest.param(dict(size=(105, 80), frameskip=2, max_frames=400), id="integer-scale-opencv-path"),
        pytest.param(  # zeros before an episode's first frame, as ale-py's pool: after resets, and autoresets
            dict(padding="zero", autoreset_mode="same_step", episodic_life=True, max_frames=500), id="zero-padding"
        ),
        pytest.param(dict(padding="zero", size=(105, 80), grayscale=False, max_frames=400), id="zero-padding-opencv"),
    ],
)
def test_settings(settings):
    assert compare_rollout(GAMES, steps=220, seed=5, backend="serial", **settings) >= 2


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(dict(backend="serial"), id="serial-84"),
        pytest.param(dict(backend="serial", size=(210, 160), grayscale=False), id="serial-rgb-full-size"),
        pytest.param(dict(backend="multiprocessing", num_workers=2, size=(105, 80)), id="mp-opencv-path"),
    ],
)
def test_roms_whose_screens_are_taller_than_210_lines(settings):
    # air_raid 250 lines, pooyan 220, carnival 214, journey_escape 230: one process holds screens of several heights
    games = ["air_raid", "pong", "pooyan", "carnival", "journey_escape", "air_raid"]
    assert compare_rollout(games, steps=150, seed=3, max_frames=300, **settings) >= 4


def test_without_the_vector_paths(monkeypatch):
    # Where the CPU lacks AVX-512, screens are read with getScreenGrayscale and resized by the scalar kernel.
    from shoal.atari import _frames, frames

    monkeypatch.setattr(frames, "PALETTE_LOOKUP", False)
    before = _frames.vectorized()
    _frames.use_vector(False)
    try:
        assert compare_rollout(GAMES, steps=220, seed=7, backend="serial", max_frames=600) >= 2
    finally:
        _frames.use_vector(before)
