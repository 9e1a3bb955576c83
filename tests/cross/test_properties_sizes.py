"""Property tests of the static sizes the kernels are built with (hypothesis): the ceiling divisions
that pad rows, pick block sizes and split Monte Carlo runs into compiled calls.

Each helper's docstring states what its result is (the smallest power of two, a multiple of a block,
at most so many releases); these check it over all sizes hypothesis draws, up to 2^62 where the
helper is plain integer arithmetic.
"""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dpjax._src.categorical import _pow2_at_least
from dpjax._src.quantiles.joint_exp_layout import MIN_WINDOW, padded_width, sampling_block, window_span
from dpjax._src.quantiles.joint_exp_linear import LINEAR_BLOCKS
from dpjax._src.quantiles.joint_exp_toeplitz import _BLOCK_ALIGN, _FILTER_BLOCK, aligned_length
from dpjax._src.studies.chunking import first_size
from dpjax._src.studies.plan import per_chunk

CHEAP = settings(max_examples=200, deadline=None, derandomize=True)
POWER_OF_TWO_NEIGHBOR = st.builds(lambda k, d: max(2**k + d, 0), st.integers(0, 62), st.integers(-1, 1))
SIZE = st.one_of(st.integers(0, 4096), st.integers(0, 2**62), POWER_OF_TWO_NEIGHBOR)
ROW = st.integers(1, 2**40)
ALIGN = _FILTER_BLOCK * _BLOCK_ALIGN


@CHEAP
@given(SIZE)
def test_pow2_at_least_is_the_smallest_power_of_two_not_below(n):
    p = _pow2_at_least(n)
    assert p & (p - 1) == 0 and p >= max(n, 1)
    assert p == 1 or p // 2 < n


@CHEAP
@given(SIZE)
def test_aligned_length_is_the_next_multiple_of_the_alignment(size):
    aligned = aligned_length(size)
    assert aligned % ALIGN == 0 and size <= aligned < size + ALIGN


@CHEAP
@given(ROW)
def test_sampling_block_covers_the_row_in_about_sqrt_blocks(size):
    """A multiple of every linear block size, at least sqrt(size) (so a row has at most ``block``
    blocks), and the least such multiple of the largest linear block."""
    block = sampling_block(size)
    assert all(block % unit == 0 for unit in LINEAR_BLOCKS)
    assert block * block >= size
    assert block - LINEAR_BLOCKS[0] < max(LINEAR_BLOCKS[0], math.isqrt(size - 1) + 1)


@CHEAP
@given(ROW)
def test_padded_width_is_the_aligned_row_in_whole_blocks(size):
    width, block, aligned = padded_width(size), sampling_block(size), aligned_length(size)
    assert width % block == 0 and aligned <= width < aligned + block


@CHEAP
@given(ROW)
def test_window_span_is_aligned_and_a_sixteenth_of_the_row_or_none(size):
    span = window_span(size)
    assert span == 0 or (span >= MIN_WINDOW and span % ALIGN == 0 and 16 * span >= aligned_length(size))


@CHEAP
@given(st.integers(1, 10**6), st.integers(1, 200), st.integers(1, 10**5))
def test_study_chunks_hold_at_most_chunk_size_releases(trials, grid_points, chunk_size):
    """``run_study(chunk_size=...)``: at most ``chunk_size`` releases (trials x grid points) per
    compiled call, unless one trial's grid points alone are more; as few calls as that allows, and
    equal ones (the last call pads fewer trials than there are calls). (Below the long-run rule's
    2^17 trials per chunk, which these sizes never reach, the user's bound alone sets the calls.)"""
    per = first_size(trials, per_chunk(grid_points, chunk_size))
    assert 1 <= per <= trials
    assert per * grid_points <= max(chunk_size, grid_points)
    calls = -(-trials // per)
    assert calls == -(-trials // max(1, chunk_size // grid_points))
    assert calls * per - trials < calls
