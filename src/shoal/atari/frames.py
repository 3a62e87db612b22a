"""Atari frame preprocessing for a batch of envs: reading screens, max-pool, area resize, frame stack.

The result equals Gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation`` (which call OpenCV's
``cv2.resize(..., interpolation=cv2.INTER_AREA)`` per env) pixel for pixel, at a fraction of the cost:

* For the usual shrink (210x160 to 84x84, any non-integer scale) a small C kernel (``_frames.c``) does the
  max-pool, the resize and the stack push of all of a worker's envs in one call. It computes each pixel's area
  average exactly in integers and rounds it, except within 1e-3 of a half, where it redoes OpenCV's float
  arithmetic with OpenCV's own weight tables (computed here) in OpenCV's order; so it rounds exactly as OpenCV
  does. OpenCV's generic area resize costs about 55 us a frame here; the kernel ~11 us (AVX-512, where the CPU has
  it; ~24 us scalar).
* Gray screens are read as palette indices and looked up in a table learned from ALE (:func:`screen_reader`).
* Other sizes (no resize, integer scales, enlargements) go through ``cv2.resize`` itself, one env at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import shoal.atari._frames as _frames

SCREEN_HEIGHT, SCREEN_WIDTH = 210, 160
FILL_NONE, FILL_REPEAT, FILL_ZERO = 0, 1, 2
"""How a push fills a stack (the kernel's codes): after the previous frames, or a new stack padded with the new
frame repeated (Gymnasium's ``padding_type="reset"``) or with zeros (``"zero"``: ale-py's ``AtariVectorEnv``)."""
PADDINGS = {"reset": FILL_REPEAT, "zero": FILL_ZERO}


def area_taps(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's INTER_AREA weights for shrinking ``src`` pixels to ``dst``, as taps: ``(index, weight)``.

    Both arrays have shape ``(taps, dst)``: destination pixel ``d`` sums ``weight[t, d] * source[index[t, d]]`` over
    ``t`` in order. The weights are OpenCV's ``computeResizeAreaTab``: computed in double precision from
    ``scale = 1 / (dst / src)`` (as ``cv::resize`` derives it), stored as float32, in OpenCV's order of terms.
    Destinations with fewer terms are padded with weight 0, which leaves a float sum unchanged.
    """
    scale = 1.0 / (dst / src)
    terms: list[list[tuple[int, float]]] = []
    for d in range(dst):
        f1 = d * scale
        f2 = f1 + scale
        cell = min(scale, src - f1)
        s2 = min(math.floor(f2), src - 1)
        s1 = min(math.ceil(f1), s2)
        mine = []
        if s1 - f1 > 1e-3:
            mine.append((s1 - 1, (s1 - f1) / cell))
        mine += [(s, 1.0 / cell) for s in range(s1, s2)]
        if f2 - s2 > 1e-3:
            mine.append((s2, min(min(f2 - s2, 1.0), cell) / cell))
        terms.append(mine)
    taps = max(len(t) for t in terms)
    index = np.zeros((taps, dst), np.int32)
    weight = np.zeros((taps, dst), np.float32)
    for d, mine in enumerate(terms):
        for t, (s, w) in enumerate(mine):
            index[t, d], weight[t, d] = s, w
        index[len(mine) :, d] = mine[-1][0]
    return index, weight


def exact_taps(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact area weights for shrinking ``src`` pixels to ``dst``, as integers: ``(first, weight)``.

    Destination ``d`` covers source interval ``[d * src / dst, (d + 1) * src / dst)``; scaled by ``dst`` every
    overlap with a source pixel is a whole number, and each destination's weights sum to ``src``. Destination
    ``d`` sums ``weight[t, d] * source[first[d] + t]``; taps are padded with weight 0 and kept inside the source.
    """
    spans = []
    for d in range(dst):
        lo, hi = d * src, (d + 1) * src
        spans.append([(s, min(hi, (s + 1) * dst) - max(lo, s * dst)) for s in range(lo // dst, -(-hi // dst))])
    taps = max(len(span) for span in spans)
    first = np.zeros(dst, np.int32)
    weight = np.zeros((taps, dst), np.int32)
    for d, span in enumerate(spans):
        start = min(span[0][0], src - taps)
        first[d] = start
        for s, w in span:
            weight[s - start, d] = w
    return first, weight


PALETTE_LOOKUP = _frames.vectorized()
"""Whether gray screens are read as palette indices and looked up (:func:`screen_reader`): where the CPU has AVX-512
VBMI, which makes the lookup a twelfth of what ALE's own conversion costs."""


def screen_reader(ale: Any, grayscale: bool, table: np.ndarray | None, raw: np.ndarray) -> Callable[[np.ndarray], None]:
    """A function that copies ``ale``'s current screen into an array: RGB, or gray.

    With a ``table`` (uint8, shape ``(2, 256)``: the gray value of each palette index, and whether it is known yet),
    a gray screen is read as palette indices into ``raw`` (``getScreen``, ~1 us) and looked up in the table (~1 us),
    instead of ``getScreenGrayscale`` (~15 us). The table is learned from ALE itself: a screen showing an index it
    does not know yet is read with ``getScreenGrayscale`` and teaches the table every index on it, so every value
    it holds is one ALE produced for that index, and results are ALE's bit for bit.
    """
    if not grayscale:
        return ale.getScreenRGB
    if table is None:
        return ale.getScreenGrayscale
    get_indices, get_gray, lookup, learn = ale.getScreen, ale.getScreenGrayscale, _frames.lookup, _frames.learn

    def read(out: np.ndarray) -> None:
        get_indices(raw)
        if not lookup(table, raw, out):
            get_gray(out)
            learn(table, raw, out)

    return read


def kernel_resizes(height: int, width: int, screen_height: int = SCREEN_HEIGHT) -> bool:
    """Whether the C kernel reproduces OpenCV for this size from a ``screen_height`` x 160 screen (a copy, or an area
    shrink at a non-integer scale).

    OpenCV takes a different code path (``resizeAreaFast``) when both scales are integers, and interpolates
    linearly when enlarging; those go through ``cv2.resize`` itself.
    """
    if (height, width) == (screen_height, SCREEN_WIDTH):
        return True
    scale_y, scale_x = 1.0 / (height / screen_height), 1.0 / (width / SCREEN_WIDTH)
    if scale_y < 1.0 or scale_x < 1.0:
        return False
    eps = np.finfo(float).eps
    return not (abs(scale_x - round(scale_x)) < eps and abs(scale_y - round(scale_y)) < eps)


@dataclass
class FrameStack:
    """Max-pools, resizes and stacks the screens of a batch of envs into an observation buffer.

    Args:
        obs: the observation rows, shape ``(rows, stack, height, width[, 3])``, written in place.
        grayscale: screens have one channel (else RGB, three).
        maxpool: observations are the max of the last two screens of a step.
        num_envs: how many envs.
        screen_heights: each env's screen height (most ROMs 210, a few up to 250; all 160 wide); None: all 210.
        padding: what fills a new stack (:meth:`push` with ``fill``) before its first frame: that frame repeated
            (``"reset"``) or zeros (``"zero"``).

    Each env captures its last two screens of a step into ``views[i][0]`` (last) and ``views[i][1]`` (the one
    before); :meth:`push` then turns them into the newest frame of its stack. Envs whose screens have the same
    height share one array of screens, ``(envs, 2, height, 160[, 3])``; :attr:`screens` is it when all do.
    """

    obs: np.ndarray
    grayscale: bool
    maxpool: bool
    num_envs: int
    screen_heights: Sequence[int] | None = None
    padding: str = "reset"
    screens: np.ndarray | None = field(init=False)
    views: list[tuple[np.ndarray, np.ndarray]] = field(init=False)

    def __post_init__(self) -> None:
        self.stack, self.height, self.width = self.obs.shape[1:4]
        self.channels = 1 if self.grayscale else 3
        heights = np.asarray(self.screen_heights or [SCREEN_HEIGHT] * self.num_envs, np.int64)
        # (sorted(set()), not np.unique, which imports numpy.ma: 3 MB and ~0.3 s in every worker)
        self._groups = [_ScreenGroup(self, h, np.flatnonzero(heights == h)) for h in sorted(set(heights.tolist()))]
        self._group_of = np.zeros(self.num_envs, np.int64)
        self._position = np.zeros(self.num_envs, np.int64)  # each env's index in its group's screens
        self.views = [None] * self.num_envs  # type: ignore[list-item]
        for g, group in enumerate(self._groups):
            self._group_of[group.envs] = g
            self._position[group.envs] = np.arange(len(group.envs))
            for envs_screens, env in zip(group.screens, group.envs.tolist()):
                self.views[env] = (envs_screens[0], envs_screens[1])
        self.screens = self._groups[0].screens if len(self._groups) == 1 else None

    def push(self, screens: np.ndarray, rows: np.ndarray, previous: np.ndarray, fill: bool = False) -> None:
        """Turn the screens of envs ``screens`` into the newest frame of obs rows ``rows``, after the stacks of obs
        rows ``previous`` shifted by one frame (``fill``: a new stack, padded as :attr:`padding` says; ``previous``
        unused).

        All three are int64 arrays of indices, one per env; ``previous`` may equal ``rows`` (in place).
        """
        if self.screens is not None:
            self._groups[0].push(screens, rows, previous, fill)
            return
        which = self._group_of[screens]
        for g, group in enumerate(self._groups):
            mine = which == g
            if mine.any():
                group.push(self._position[screens[mine]], rows[mine], previous[mine], fill)


class _ScreenGroup:
    """The envs of a :class:`FrameStack` whose screens have one height: their screens and the resize tables from
    that height."""

    def __init__(self, frames: FrameStack, screen_height: int, envs: np.ndarray) -> None:
        self.frames, self.screen_height, self.envs = frames, screen_height, envs
        height, width, channels = frames.height, frames.width, frames.channels
        shape = (screen_height, SCREEN_WIDTH) if frames.grayscale else (screen_height, SCREEN_WIDTH, 3)
        self.screens = np.zeros((len(envs), 2, *shape), np.uint8)
        self.kernel = kernel_resizes(height, width, screen_height)
        if (height, width) == (screen_height, SCREEN_WIDTH):  # no resize: the kernel copies
            self.x = self.y = (np.zeros((0, width), np.int32), np.zeros((0, width), np.float32))
        else:
            index, weight = area_taps(SCREEN_WIDTH, width)
            channel = np.arange(channels, dtype=np.int32)
            self.x = (  # per (column, channel) element, as the kernel loops over them
                (index[:, :, None] * channels + channel).reshape(len(index), -1),
                np.repeat(weight, channels, axis=1),
            )
            self.y = area_taps(screen_height, height)
        self.exact = (*exact_taps(SCREEN_WIDTH, width), *exact_taps(screen_height, height))
        self.scratch = np.zeros((SCREEN_WIDTH + 2 * width) * channels, np.uint32)

    def push(self, screens: np.ndarray, rows: np.ndarray, previous: np.ndarray, fill: bool) -> None:
        """:meth:`FrameStack.push` for screens ``screens`` of this group (indices into :attr:`screens`)."""
        f = self.frames
        if self.kernel:
            _frames.push(
                self.screens, f.obs, rows, previous, screens, f.maxpool, PADDINGS[f.padding] if fill else FILL_NONE,
                f.stack, self.screen_height, SCREEN_WIDTH, f.channels, f.height, f.width, *self.x, *self.y, *self.exact,
                self.screen_height * SCREEN_WIDTH, self.scratch,
            )
        else:
            self._push_with_opencv(screens, rows, previous, fill)

    def _push_with_opencv(self, screens: np.ndarray, rows: np.ndarray, previous: np.ndarray, fill: bool) -> None:
        import cv2

        f = self.frames
        for screen, row, before_row in zip(screens.tolist(), rows.tolist(), previous.tolist()):
            last, before = self.screens[screen, 0], self.screens[screen, 1]
            if f.maxpool:
                np.maximum(last, before, out=last)
            frame = cv2.resize(last, (f.width, f.height), interpolation=cv2.INTER_AREA)
            slots = f.obs[row]
            if fill:
                slots[:-1] = frame if f.padding == "reset" else 0
            else:
                slots[:-1] = f.obs[before_row, 1:].copy()
            slots[-1] = frame


@dataclass
class RamStack:
    """Stacks the console RAM of a batch of envs into an observation buffer (``obs_type="ram"``): no pooling or
    resizing, the same :meth:`push` as :class:`FrameStack`.

    Args:
        obs: the observation rows, shape ``(rows, stack, 128)``, written in place.
        num_envs: how many envs (rows of ``screens``).
        padding: as :class:`FrameStack`'s.

    Each env reads its RAM at the end of a step into ``screens[i, 0]`` (``views[i][0]``).
    """

    obs: np.ndarray
    num_envs: int
    padding: str = "reset"
    screens: np.ndarray = field(init=False)
    views: list[tuple[np.ndarray, np.ndarray]] = field(init=False)

    def __post_init__(self) -> None:
        self.screens = np.zeros((self.num_envs, 2, self.obs.shape[2]), np.uint8)
        self.views = [(envs_screens[0], envs_screens[1]) for envs_screens in self.screens]

    def push(self, screens: np.ndarray, rows: np.ndarray, previous: np.ndarray, fill: bool = False) -> None:
        """As :meth:`FrameStack.push`: ``screens[screens, 0]`` becomes the newest frame of obs rows ``rows``."""
        newest = self.screens[screens, 0]
        if fill:
            self.obs[rows, :-1] = newest[:, None] if self.padding == "reset" else 0
        else:
            self.obs[rows, :-1] = self.obs[previous, 1:]  # fancy indexing reads a copy: rows may equal previous
        self.obs[rows, -1] = newest


def ram_reader(ale: Any) -> Callable[[np.ndarray], None]:
    """A function that copies ``ale``'s RAM (128 bytes) into an array (ALE writes it in place)."""
    return ale.getRAM
