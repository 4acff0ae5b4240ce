"""Chapter 11 (long sequences): the notes' index sets by brute force, every pattern against dense
masked attention, FlashAttention against PyTorch's fused kernel, Transformer-XL's recurrence
against one masked pass, memory that grows linearly, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import accelerated as att_acc
from course_lib.attention import reference as att_ref
from course_lib.long_sequences import accelerated as acc
from course_lib.long_sequences import exercises as check
from course_lib.long_sequences import reference as ref
from course_lib.long_sequences import task as recall
from course_lib.long_sequences.transformer_xl import TransformerXL, recurrence_mask
from course_lib.long_sequences.widget import KINDS, pattern_view, render_html
from course_lib.measure import peak_tensor_memory


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def qkv(L_q: int, L_k: int | None = None, d: int = 4, batch=(), seed: int = 0):
    r = rng(seed)
    L_k = L_q if L_k is None else L_k
    return (
        r.standard_normal((*batch, L_q, d)),
        r.standard_normal((*batch, L_k, d)),
        r.standard_normal((*batch, L_k, d)),
    )


def from_sets(L: int, sets) -> np.ndarray:
    mask = np.zeros((L, L), dtype=bool)
    for i, S in enumerate(sets):
        mask[i, sorted(S)] = True
    return mask


# ----------------------------------------------------------------------------- patterns
# The index sets exactly as Strabel's notes print them (section 9.2), with positions from 0,
# inside {j : j <= i} as the notes require; the fixed head 2 with the notes' {t, ..., l}.
def notes_strided(i: int, l: int, head: int) -> set[int]:
    t = max(0, i - l)
    a1 = set(range(t, i + 1))
    a2 = {j for j in range(i + 1) if (i - j) % l == 0}
    return {1: a1, 2: a2, 0: a1 | a2}[head]


def notes_fixed(i: int, l: int, c: int, head: int) -> set[int]:
    a1 = {j for j in range(i + 1) if j // l == i // l}
    t = l - c
    a2 = {j for j in range(i + 1) if j % l in set(range(t, l + 1))}
    return {1: a1, 2: a2, 0: a1 | a2}[head]


@pytest.mark.parametrize("head", [0, 1, 2])
@pytest.mark.parametrize(("L", "l"), [(1, 1), (7, 1), (9, 3), (16, 4), (17, 5)])
def test_strided_mask_is_the_notes_index_sets(L, l, head):
    want = from_sets(L, [notes_strided(i, l, head) for i in range(L)])
    np.testing.assert_array_equal(ref.strided_mask(L, l, head), want)
    np.testing.assert_array_equal(acc.strided_mask(L, l, head).numpy(), want)


@pytest.mark.parametrize("head", [0, 1, 2])
@pytest.mark.parametrize(("L", "l", "c"), [(6, 3, 1), (16, 4, 2), (17, 5, 5), (8, 1, 1)])
def test_fixed_mask_is_the_notes_index_sets(L, l, c, head):
    want = from_sets(L, [notes_fixed(i, l, c, head) for i in range(L)])
    np.testing.assert_array_equal(ref.fixed_mask(L, l, c, head), want)
    np.testing.assert_array_equal(acc.fixed_mask(L, l, c, head).numpy(), want)


def test_the_notes_fixed_set_names_one_value_too_many():
    """{t, ..., l} has c + 1 values; j mod l never reaches l, so only c summary positions."""
    l, c = 4, 2
    printed = set(range(l - c, l + 1))
    reachable = {j % l for j in range(100)} & printed
    assert len(printed) == c + 1 and len(reachable) == c


def test_strided_pattern_costs_l_sqrt_l():
    for L in (64, 256, 1024):
        l = int(np.sqrt(L))
        n = int(acc.strided_mask(L, l).sum())
        assert n <= 2 * L * (l + 1)  # each query: l + 1 neighbours and at most L / l + 1 others
        assert n < L * L / 4


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("L", "w", "dil"), [(1, 0, 1), (9, 2, 1), (9, 2, 3), (12, 11, 1), (10, 3, 2)]
)
def test_sliding_window_mask_by_brute_force(L, w, dil, causal):
    want = np.array(
        [
            [
                abs(i - j) <= w * dil and (i - j) % dil == 0 and (not causal or j <= i)
                for j in range(L)
            ]
            for i in range(L)
        ]
    )
    np.testing.assert_array_equal(ref.sliding_window_mask(L, w, dil, causal), want)
    np.testing.assert_array_equal(acc.sliding_window_mask(L, w, dil, causal).numpy(), want)


def test_global_mask_rows_and_columns():
    m = ref.global_mask(6, [0, 4])
    assert m[0].all() and m[4].all() and m[:, 0].all() and m[:, 4].all()
    assert m.sum() == 2 * 6 + 2 * 6 - 4
    np.testing.assert_array_equal(acc.global_mask(6, torch.tensor([0, 4])).numpy(), m)
    assert not ref.global_mask(3, []).any()


@pytest.mark.parametrize(
    ("n", "r", "g", "seed"), [(8, 2, 1, 0), (10, 3, 2, 5), (6, 0, 0, 1), (12, 1, 1, 3)]
)
def test_bigbird_layout_has_its_three_parts(n, r, g, seed):
    lay = ref.bigbird_layout(n, r, g, seed)
    np.testing.assert_array_equal(acc.bigbird_layout(n, r, g, seed).numpy(), lay)
    glob = [b for b in range(n) if b < g or b >= n - g]
    assert lay[glob].all() and lay[:, glob].all()
    for i in set(range(n)) - set(glob):
        window = set(range(max(0, i - 1), min(n, i + 2)))
        assert all(lay[i, j] for j in window)
        extra = set(np.flatnonzero(lay[i])) - window - set(glob)
        assert len(extra) == r  # exactly r random blocks outside the window and the globals
    assert (ref.bigbird_layout(n, r, g, seed) == lay).all()  # reproducible from the seed


def test_expand_layout_matches_kron():
    lay = rng(1).random((3, 4)) < 0.5
    want = np.kron(lay, np.ones((2, 2))).astype(bool)
    np.testing.assert_array_equal(ref.expand_layout(lay, 2), want)
    np.testing.assert_array_equal(acc.expand_layout(torch.from_numpy(lay), 2).numpy(), want)


# ----------------------------------------------------------------------------- attention
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("L", "w", "dil"), [(1, 0, 1), (10, 2, 1), (13, 3, 2), (16, 1, 4), (7, 6, 1)]
)
def test_sliding_window_attention_is_dense_attention_under_the_mask(L, w, dil, causal):
    q, k, v = qkv(L, batch=(2,), seed=L + w)
    mask = ref.sliding_window_mask(L, w, dil, causal)
    want = att_ref.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(
        ref.sliding_window_attention(q, k, v, w, dil, causal), want, rtol=1e-12
    )
    got = acc.sliding_window_attention(*map(torch.from_numpy, (q, k, v)), w, dil, causal)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def _layouts():
    yield "strided blocks", acc.strided_mask(6, 2).numpy(), True
    yield "fixed blocks", acc.fixed_mask(6, 3, 1).numpy(), True
    yield "BigBird", ref.bigbird_layout(6, 1, 1, 0), False
    yield "a random layout with an empty row", np.array([[1, 0], [0, 0]], dtype=bool), False


@pytest.mark.parametrize(
    ("name", "layout", "causal"), list(_layouts()), ids=lambda x: x if isinstance(x, str) else ""
)
def test_block_sparse_attention_is_dense_attention_under_the_expanded_mask(name, layout, causal):
    block = 3
    L = layout.shape[0] * block
    q, k, v = qkv(L, layout.shape[1] * block, batch=(2, 1), seed=7)
    mask = ref.expand_layout(layout, block)
    if causal:
        mask = mask & att_ref.causal_mask(L)
    want = att_ref.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(
        ref.block_sparse_attention(q, k, v, layout, block, causal), want, rtol=1e-12
    )
    got = acc.block_sparse_attention(
        *map(torch.from_numpy, (q, k, v)), torch.from_numpy(layout), block, causal
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_longformer_and_bigbird_patterns_are_dense_attention_under_their_masks():
    """Sliding window + global tokens (Longformer) via chapter 4's masked attention, both sides."""
    L = 12
    q, k, v = qkv(L, seed=3)
    mask = ref.sliding_window_mask(L, 2) | ref.global_mask(L, [0, 7])
    want = att_ref.scaled_dot_product_attention(q, k, v, mask=mask)
    got = att_acc.scaled_dot_product_attention(
        *map(torch.from_numpy, (q, k, v)), mask=torch.from_numpy(mask)
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("L_q", "L_k", "block"), [(1, 1, 1), (10, 10, 3), (17, 17, 4), (5, 12, 4), (33, 33, 64)]
)
def test_flash_attention_is_exact_attention(L_q, L_k, block, causal):
    q, k, v = qkv(L_q, L_k, batch=(2,), seed=L_q)
    mask = att_ref.causal_mask(max(L_q, L_k))[:L_q, :L_k] if causal else None
    want = att_ref.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(
        ref.flash_attention(q, k, v, causal, block), want, rtol=1e-12, atol=1e-14
    )
    t = [torch.from_numpy(a) for a in (q, k, v)]
    np.testing.assert_allclose(
        acc.flash_attention(*t, causal, block).numpy(), want, rtol=1e-10, atol=1e-12
    )
    sdpa = F.scaled_dot_product_attention(*t, is_causal=causal)  # top-left causal, as ours
    torch.testing.assert_close(acc.flash_attention(*t, causal, block), sdpa)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_in_worker_threads_is_exact(causal):
    # 4096 x 4096 logits: with two threads the query blocks go to two worker threads
    q, k, v = (
        torch.randn(1, 4096, 16, generator=torch.Generator().manual_seed(i)) for i in range(3)
    )
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = acc.flash_attention(q, k, v, causal=causal, block_size=512)
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(acc.flash_attention(q, k, v, causal=causal, block_size=512), got)


def test_flash_attention_gradients_equal_autograd_of_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 50, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    g = torch.randn(2, 3, 50, 16, dtype=torch.float64)
    for causal in (False, True):
        ours = torch.autograd.grad(acc.flash_attention(q, k, v, causal, 16), (q, k, v), g)
        theirs = torch.autograd.grad(
            F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), g
        )
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b)
    small = [torch.randn(1, 7, 3, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    assert torch.autograd.gradcheck(
        lambda *x: acc.flash_attention(*x, causal=True, block_size=3), small
    )


def test_flash_attention_float32_and_float16_agree_with_sdpa():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 300, 32) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(acc.flash_attention(q, k, v, True, 128), want, rtol=1e-4, atol=1e-5)
    half = acc.flash_attention(q.half(), k.half(), v.half(), True, 128)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), want, rtol=2e-2, atol=2e-2)


# ----------------------------------------------------------------------------- memory
def _peak(fn, *shapes) -> int:
    torch.manual_seed(0)
    args = [torch.randn(s) for s in shapes]
    return peak_tensor_memory(lambda: fn(*args), exclude_result=True)


@pytest.mark.slow
def test_memory_grows_linearly_for_the_blocked_methods_and_quadratically_for_dense():
    d = 32
    dense, window, flash, blocks = [], [], [], []
    for L in (512, 1024, 2048):
        s = (L, d)
        dense.append(_peak(lambda q, k, v: att_acc.scaled_dot_product_attention(q, k, v), s, s, s))
        window.append(_peak(lambda q, k, v: acc.sliding_window_attention(q, k, v, 32), s, s, s))
        flash.append(_peak(lambda q, k, v: acc.flash_attention(q, k, v, False, 128), s, s, s))
        layout = torch.from_numpy(ref.bigbird_layout(L // 32, 2, 1, 0))
        blocks.append(
            _peak(lambda q, k, v, lay=layout: acc.block_sparse_attention(q, k, v, lay, 32), s, s, s)
        )
    for name, peaks, lo, hi in (
        ("dense", dense, 3.5, 4.5),
        ("sliding window", window, 1.7, 2.3),
        ("block sparse", blocks, 1.5, 2.5),
    ):
        for a, b in zip(peaks, peaks[1:], strict=False):
            assert lo <= b / a <= hi, f"{name}: peak x{b / a:.2f} per doubling ({peaks})"
    # blockwise: one fixed (128, 128) tile, its row statistics and one log-sum-exp per row, O(L)
    assert flash[-1] - flash[0] <= (2048 - 512) * (d + 2) * 4
    assert flash[-1] < dense[-1] / 50


def test_flash_attention_backward_stores_no_l_by_l_matrix():
    L, d = 2048, 16
    q, k, v = (torch.randn(L, d, requires_grad=True) for _ in range(3))

    def step():
        acc.flash_attention(q, k, v, True, 256).sum().backward()

    peak = peak_tensor_memory(step)
    assert peak < L * L * 4 / 4  # a quarter of one float32 (L, L) matrix (16 MiB)


# ----------------------------------------------------------------------------- Transformer-XL
def _brute_xl(q, k, r_by_distance, u, w):
    """The four terms from their definitions, with R indexed by distance (natural order)."""
    L_q, K = q.shape[0], k.shape[0]
    M = K - L_q
    out = np.zeros((L_q, K))
    for i in range(L_q):
        for j in range(K):
            a = q[i] @ k[j]
            c = u @ k[j]
            out[i, j] = a + c
            if j <= M + i:
                R = r_by_distance[M + i - j]
                out[i, j] += q[i] @ R + w @ R  # (b) + (d)
    return out


@pytest.mark.parametrize(("L_q", "M"), [(1, 0), (4, 0), (3, 5), (6, 2)])
def test_xl_four_terms_equal_their_definition(L_q, M):
    r = rng(L_q + M)
    d = 4
    q, k = r.standard_normal((L_q, d)), r.standard_normal((M + L_q, d))
    R, u, w = r.standard_normal((M + L_q, d)), r.standard_normal(d), r.standard_normal(d)
    want = _brute_xl(q, k, R, u, w)
    desc = R[::-1].copy()  # Transformer-XL's order: distances K - 1, ..., 0
    np.testing.assert_allclose(ref.xl_relative_logits(q, k, desc, u, w), want, rtol=1e-12)
    got = acc.xl_relative_logits(*map(torch.from_numpy, (q, k, desc, u, w)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_rel_shift_is_the_gather_it_replaces():
    x = rng(2).standard_normal((2, 4, 7))
    L_q, K = 4, 7
    want = np.zeros_like(x)
    for i in range(L_q):
        for j in range(K - L_q + i + 1):
            want[:, i, j] = x[:, i, j + L_q - 1 - i]
    np.testing.assert_array_equal(ref.rel_shift(x), want)
    np.testing.assert_array_equal(acc.rel_shift(torch.from_numpy(x)).numpy(), want)


@pytest.mark.parametrize(
    ("T", "L", "M", "layers"),
    [(12, 4, 4, 2), (12, 3, 6, 3), (10, 5, 2, 1), (8, 8, 0, 2), (9, 3, 0, 2)],
)
def test_segment_recurrence_equals_one_masked_pass(T, L, M, layers):
    model = TransformerXL(d_model=16, n_heads=2, n_layers=layers, seed=1).double()
    x = torch.randn(2, T, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(T))
    torch.testing.assert_close(model.forward_segments(x, L, M), model.forward_full(x, L, M))


def test_with_an_empty_memory_each_segment_is_on_its_own():
    model = TransformerXL(d_model=8, n_heads=1, n_layers=2, seed=0).double()
    x = torch.randn(1, 8, 8, dtype=torch.float64)
    alone = torch.cat([model.forward_full(x[:, s : s + 4], 4, 0) for s in (0, 4)], dim=1)
    torch.testing.assert_close(model.forward_segments(x, 4, 0), alone)
    assert not recurrence_mask(8, 4, 0)[4, :4].any()


def test_the_memory_receives_no_gradient():
    model = TransformerXL(d_model=8, n_heads=2, n_layers=2, seed=0).double()
    x = torch.randn(1, 8, 8, dtype=torch.float64, requires_grad=True)
    probe = torch.randn(8, dtype=torch.float64)  # (a sum of a layer norm's output is 0)
    loss = lambda out: (out[:, 4:] @ probe).sum()  # noqa: E731  (the second segment only)
    (g_sg,) = torch.autograd.grad(loss(model.forward_segments(x, 4, 4)), x)
    (g_flow,) = torch.autograd.grad(loss(model.forward_segments(x, 4, 4, detach=False)), x)
    (g_full,) = torch.autograd.grad(loss(model.forward_full(x, 4, 4)), x)
    assert (g_sg[:, :4] == 0).all() and g_flow[:, :4].abs().max() > 1e-3
    torch.testing.assert_close(g_flow, g_full)  # without SG: the masked pass's gradient
    torch.testing.assert_close(g_sg[:, 4:], g_full[:, 4:])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: ref.sliding_window_mask(8, 8), ValueError, "window is larger than the sequence"),
        (lambda: acc.sliding_window_mask(8, 4, dilation=2), ValueError, "window is larger"),
        (
            lambda: ref.sliding_window_attention(*qkv(6), window=6),
            ValueError,
            "larger than the sequence",
        ),
        (
            lambda: acc.block_sparse_attention(
                *map(torch.from_numpy, qkv(10)), np.ones((3, 3), bool), 4
            ),
            ValueError,
            "not a multiple of block=4",
        ),
        (
            lambda: ref.block_sparse_attention(*qkv(8), np.ones((2, 3), bool), 4),
            ValueError,
            "layout must have shape (2, 2)",
        ),
        (
            lambda: acc.block_sparse_attention(*map(torch.from_numpy, qkv(8)), np.ones((2, 2)), 4),
            TypeError,
            "layout must be boolean",
        ),
        (lambda: ref.global_mask(5, [0, 5]), ValueError, "global_idx [5] out of range"),
        (lambda: acc.global_mask(5, [-1]), ValueError, "out of range"),
        (lambda: acc.global_mask(5, [0.5]), TypeError, "integer positions"),
        (lambda: ref.strided_mask(4, 5), ValueError, "stride must be at most 4"),
        (lambda: acc.fixed_mask(8, 4, 5), ValueError, "c must be at most 4"),
        (lambda: ref.strided_mask(8, 2, head=3), ValueError, "head must be 1, 2 or 0"),
        (lambda: ref.bigbird_layout(5, 1), ValueError, "random blocks do not fit"),
        (
            lambda: acc.flash_attention(torch.ones(4, 3), torch.ones(4, 2), torch.ones(4, 2)),
            ValueError,
            "same last dimension d_k",
        ),
        (
            lambda: acc.flash_attention(torch.ones(4, 2), torch.ones(5, 2), torch.ones(4, 2)),
            ValueError,
            "one value per key",
        ),
        (
            lambda: acc.flash_attention(
                torch.ones(4, 2), torch.ones(4, 2), torch.ones(4, 2), block_size=0
            ),
            ValueError,
            "block_size must be at least 1",
        ),
        (
            lambda: acc.flash_attention(
                torch.ones(4, 2, dtype=torch.int64), torch.ones(4, 2), torch.ones(4, 2)
            ),
            TypeError,
            "floating-point",
        ),
        (lambda: ref.rel_shift(np.ones((3, 2))), ValueError, "at least as many keys"),
        (
            lambda: acc.xl_relative_logits(
                torch.ones(2, 4), torch.ones(3, 4), torch.ones(2, 4), torch.ones(4), torch.ones(4)
            ),
            ValueError,
            "one embedding per key distance",
        ),
        (
            lambda: TransformerXL(8, 2, 1).forward_segments(torch.ones(1, 10, 8), 4, 4),
            ValueError,
            "not a multiple of segment_len=4",
        ),
    ],
)
def test_bad_input_is_a_clear_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


# ----------------------------------------------------------------------------- exercises, widget
def _window_by_blocks(q, k, v, w, mask_padding=True):
    """Sliding-window attention by blocks of w queries (the exercise's solution)."""
    L, d = q.shape
    nb = -(-L // w)
    pad = nb * w - L
    Q = np.pad(q, ((0, pad), (0, 0))).reshape(nb, w, d)  # (nb, w, d)
    K, V = (np.pad(a, ((w, w + pad), (0, 0))) for a in (k, v))
    K3 = np.stack([K[a * w : (a + 3) * w] for a in range(nb)])  # (nb, 3w, d)
    V3 = np.stack([V[a * w : (a + 3) * w] for a in range(nb)])
    i = np.arange(nb * w).reshape(nb, w, 1)
    j = (np.arange(nb) * w - w).reshape(nb, 1, 1) + np.arange(3 * w)
    keep = (abs(i - j) <= w) & (((j >= 0) & (j < L)) | (not mask_padding))
    logits = np.where(keep, Q @ K3.transpose(0, 2, 1) / np.sqrt(d), -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ V3).reshape(nb * w, -1)[:L]


def test_checkers_accept_solutions_and_name_mistakes():
    assert check.window_attention(_window_by_blocks)
    padded = check.window_attention(lambda q, k, v, w: _window_by_blocks(q, k, v, w, False))
    assert not padded and "outside the sequence receive attention" in str(padded)
    half = check.window_attention(lambda q, k, v, w: _window_by_blocks(q, k, v, max(1, w // 2)))
    assert not half and "EACH side" in str(half)

    def dense(q, k, v, w):
        return ref.sliding_window_attention(q, k, v, w) + 0 * (q @ k.T).sum()  # an (L, L) temp

    big = check.window_attention(dense)
    assert not big and "MiB" in str(big)

    def update(m, s, acc_, logits, values):
        m_new = np.maximum(m, logits.max(-1))
        p = np.exp(logits - m_new[:, None])
        return (
            m_new,
            np.exp(m - m_new) * s + p.sum(-1),
            np.exp(m - m_new)[:, None] * acc_ + p @ values,
        )

    def no_rescale(m, s, acc_, logits, values):
        m_new, s_new, _ = update(m, s, acc_, logits, values)
        return m_new, s_new, acc_ + np.exp(logits - m_new[:, None]) @ values

    assert check.online_softmax_update(update)
    out = check.online_softmax_update(no_rescale)
    assert not out and "rescale the old acc" in str(out)

    q, k, v = np.random.default_rng(0).standard_normal((3, 6, 4))
    want = ref.flash_attention(q, k, v, block_size=6)
    np.testing.assert_allclose(check.attend_in_blocks(update, q, k, v, 2), want, atol=1e-12)
    np.testing.assert_allclose(check.attend_in_blocks(no_rescale, q, k, v, 6), want, atol=1e-12)
    assert not np.allclose(check.attend_in_blocks(no_rescale, q, k, v, 2), want)
    with pytest.raises(ValueError, match="block"):
        check.attend_in_blocks(update, q, k, v, 0)


def _window_keys(keys_of, scale=None):
    """A window attention where query i sees the positions keys_of(i, w) (a loop; small L)."""

    def fn(q, k, v, w):
        L, d = q.shape
        out = np.zeros((L, v.shape[1]))
        for i in range(L):
            j = np.array([j for j in keys_of(i, w) if 0 <= j < L])
            x = k[j] @ q[i] * (1 / np.sqrt(d) if scale is None else scale)
            p = np.exp(x - x.max())
            out[i] = p @ v[j] / p.sum()
        return out

    return fn


def _blocks(i, w):
    return range((i // w - 1) * w, (i // w + 2) * w)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda q, k, v, w: _window_by_blocks(q, k, v, w, False), "outside the sequence"),
        (lambda q, k, v, w: _window_by_blocks(q, k, v, max(1, w // 2)), "EACH side"),
        (_window_keys(_blocks), "all 3w keys"),
        (_window_keys(lambda i, w: range(i - w, i + 1)), "not causal"),
        (_window_keys(lambda i, w: range(i - w + 1, i + w)), "off by one"),
        (_window_keys(lambda i, w: range(i - w, i + w + 1), scale=1.0), "sqrt(d)"),
    ],
)
def test_window_checker_names_each_mistake(fn, words):
    out = check.window_attention(fn)
    assert not out and words in str(out), str(out)


@pytest.mark.parametrize(
    "fn",
    [
        _window_by_blocks,
        lambda q, k, v, w: _window_by_blocks(q, k, v, w).tolist(),  # nested lists
        lambda q, k, v, w: torch.from_numpy(_window_by_blocks(q, k, v, w)),  # a tensor
        lambda q, k, v, w: _window_by_blocks(q, k, v, w).astype(np.float32),  # float32
    ],
)
def test_window_checker_accepts_every_right_form(fn):
    assert check.window_attention(fn), str(check.window_attention(fn))


def _update_parts(rescale_s=True, rescale_acc=True, inverse=False):
    def update(m, s, acc_, logits, values):
        m_new = np.maximum(m, logits.max(-1))
        p = np.exp(logits - m_new[:, None])
        with np.errstate(over="ignore", invalid="ignore"):
            f = np.exp(m_new - m) if inverse else np.exp(m - m_new)
            s_new = (f * s if rescale_s else s) + p.sum(-1)
            acc_new = (f[:, None] * acc_ if rescale_acc else acc_) + p @ values
        return m_new, s_new, acc_new

    return update


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_update_parts(rescale_acc=False), "rescale the old acc"),
        (_update_parts(rescale_s=False), "rescale the old sum"),
        (_update_parts(inverse=True), "not its inverse"),
        (lambda m, s, a, x, v: (m, s), "three things"),
    ],
)
def test_online_softmax_checker_names_each_mistake(fn, words):
    out = check.online_softmax_update(fn)
    assert not out and words in str(out), str(out)


def test_online_softmax_checker_accepts_every_right_form():
    right = _update_parts()
    assert check.online_softmax_update(right)
    assert check.online_softmax_update(lambda *a: list(right(*a)))  # a list of three
    assert check.online_softmax_update(lambda *a: tuple(torch.from_numpy(x) for x in right(*a)))
    assert check.online_softmax_update(lambda *a: tuple(x.astype(np.float32) for x in right(*a)))


def _no_return(*args):
    pass


def _raises(*args):
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (None, "expected a function"),
        (_no_return, "return"),
        (_raises, "RuntimeError"),
        (lambda *a: "text", ""),
        (lambda *a: b"bytes", ""),
        (lambda *a: (x for x in range(3)), ""),
        (lambda *a: float("nan"), ""),
        (lambda *a: np.full((12, 3), np.nan), ""),
        (lambda x: x, "TypeError"),  # a wrong signature
    ],
)
def test_checkers_answer_garbage_in_words(fn, words):
    for checker in (check.window_attention, check.online_softmax_update):
        out = checker(fn)
        assert not out and out.details and words in str(out), str(out)


def test_window_checker_reports_a_function_that_fails_only_at_the_long_input():
    def small_only(q, k, v, w):
        if len(q) > 100:
            raise MemoryError("too long")
        return _window_by_blocks(q, k, v, w)

    out = check.window_attention(small_only)
    assert not out and "MemoryError" in str(out) and "L = 2048" in str(out)


@pytest.mark.parametrize("kind", KINDS)
def test_pattern_view_counts_the_mask(kind):
    v = pattern_view(kind, L=24, window=2, stride=4, n_global=1)
    assert v["computed"] == int(v["mask"].sum()) and v["dense"] == 24 * 24
    assert v["mask"].shape == (24, 24) and v["computed"] <= v["dense"]
    assert "entries computed" in render_html(v)


def test_pattern_view_reports_a_bad_window_in_words():
    with pytest.raises(ValueError, match="window is larger than the sequence"):
        pattern_view("sliding window", L=8, window=9)


# ----------------------------------------------------------------------------- Hugging Face parity
def test_longformer_equals_hugging_face_longformer_self_attention():
    from transformers import LongformerConfig
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    from course_lib.long_sequences.longformer import PROJECTIONS, longformer_self_attention

    torch.manual_seed(0)
    config = LongformerConfig(
        hidden_size=16,
        num_attention_heads=2,
        attention_window=[4],
        attention_probs_dropout_prob=0.0,
    )
    layer = LongformerSelfAttention(config, layer_id=0).eval()  # random weights, window 2 + 2
    params = {}
    for name in PROJECTIONS:  # our weights are theirs, the global projections included
        params[name] = getattr(layer, name).weight.detach()
        params[f"{name}_bias"] = getattr(layer, name).bias.detach()
    B, L = 2, 12
    x = torch.randn(B, L, 16)
    for glob in ([], [0], [0, 7, 11]):
        is_global = torch.zeros(B, L, dtype=torch.bool)
        is_global[:, glob] = True
        (theirs,) = layer(
            x,
            attention_mask=torch.where(is_global, 10000.0, 0.0),  # 0 local, + global
            is_index_masked=torch.zeros(B, L, dtype=torch.bool),
            is_index_global_attn=is_global,
            is_global_attn=bool(glob),
        )
        ours = longformer_self_attention(x, params, n_heads=2, window=2, global_idx=glob)
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def _hf_bigbird(training: bool):
    from transformers import BigBirdConfig, BigBirdModel
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention

    torch.manual_seed(0)
    config = BigBirdConfig(
        hidden_size=16,
        num_attention_heads=2,
        block_size=4,
        num_random_blocks=2,
        attention_type="block_sparse",
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=128,
    )
    layer = BigBirdBlockSparseAttention(config, seed=0).double().train(training)
    B, L, b = 2, 64, 4
    x = torch.randn(B, L, 16, dtype=torch.float64)
    blocked, band, from_m, to_m = BigBirdModel.create_masks_for_block_sparse_attn(
        torch.ones(B, L, dtype=torch.float64), b
    )
    out, probs = layer(
        x,
        band_mask=band,
        from_mask=from_m,
        to_mask=to_m,
        from_blocked_mask=blocked,
        to_blocked_mask=blocked,
    )
    nb = L // b
    layout = probs.view(B, 2, nb, b, nb, b).amax(dim=(3, 5)) > 0  # (B, h, nb, nb): its pattern
    q, k, v = (
        getattr(layer, n)(x).view(B, L, 2, 8).transpose(1, 2) for n in ("query", "key", "value")
    )
    return out.detach(), layout, q.detach(), k.detach(), v.detach(), b


def test_bigbird_block_sparse_equals_hugging_face_in_training_mode():
    out, layout, q, k, v, b = _hf_bigbird(training=True)
    assert (layout[0] == layout[1]).all()  # one pattern per head, shared by the batch
    for head in range(2):
        lay = layout[0, head].numpy()
        rows = lay.sum(axis=1)
        assert rows[0] == rows[-1] == lay.shape[0]  # global first and last blocks
        assert (rows[2:-2] == 2 + 3 + 2).all()  # 2 global + 3 window + 2 random blocks
        ours = acc.block_sparse_attention(q[:, head], k[:, head], v[:, head], lay, b)
        torch.testing.assert_close(ours, out.view(2, 64, 2, 8)[:, :, head])


def test_bigbird_in_evaluation_mode_counts_block_0_three_times():
    """Eval mode replaces every random block by block 0, which is global already: block 0 is
    attended three times (1 + r), which is the mask plus a bias log(1 + r) on its keys."""
    out, layout, q, k, v, b = _hf_bigbird(training=False)
    lay = layout[0, 0]
    assert (lay.sum(dim=1)[2:-2] == 2 + 3).all()  # no random block left
    mask = acc.expand_layout(lay, b)
    as_mask = (
        att_acc.scaled_dot_product_attention(q, k, v, mask=mask).transpose(1, 2).reshape(2, 64, 16)
    )
    assert (as_mask - out).abs().max() > 1e-2  # not the attention under any mask
    bias = torch.zeros(64, 64, dtype=torch.float64)
    bias[b:-b, :b] = np.log(1 + 2)
    tripled = att_acc.scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)
    torch.testing.assert_close(tripled.transpose(1, 2).reshape(2, 64, 16), out)


# ----------------------------------------------------------------------------- reach
def test_receptive_field_is_the_boolean_power_of_the_mask_by_brute_force():
    from course_lib.long_sequences.reach import layers_to_reach, receptive_field

    L = 20
    mask = ref.strided_mask(L, 4, head=1)
    step = mask | np.eye(L, dtype=bool)
    # brute force: follow every path of n steps
    heard = [{j for j in range(L) if step[i, j]} for i in range(L)]
    for n in (1, 2, 3):
        want = np.zeros((L, L), dtype=bool)
        for i in range(L):
            want[i, sorted(heard[i])] = True
        np.testing.assert_array_equal(receptive_field(mask, n), want)
        neighbours = [np.flatnonzero(step[i]) for i in range(L)]
        heard = [set().union(*(heard[j] for j in neighbours[i])) for i in range(L)]  # one more step
    assert layers_to_reach(ref.sliding_window_mask(L, 2, causal=True)) == 10  # 19 / 2, rounded up
    assert layers_to_reach(ref.strided_mask(L, 4)) == 2
    assert layers_to_reach(ref.sliding_window_mask(L, 2, dilation=2), 19, 0) is None  # odd distance
    with pytest.raises(ValueError, match="square boolean"):
        receptive_field(np.ones((2, 3), dtype=bool), 1)


# ----------------------------------------------------------------------------- recall task
def test_recall_data_is_deterministic_and_holds_the_answer():
    task = recall.RecallTask()
    a, b = recall.make_recall(500, task, seed=3), recall.make_recall(500, task, seed=3)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert not torch.equal(a.tokens, recall.make_recall(500, task, seed=4).tokens)
    assert a.tokens.shape == (500, task.L) and a.tokens.dtype == torch.int64
    assert a.answer.shape == a.position.shape == (500,)
    assert int(a.tokens.min()) >= 0 and int(a.tokens.max()) < task.vocab_size
    rows = torch.arange(500)
    pair = a.tokens[rows, a.position] - task.n_filler  # key * n_values + value
    query_key = a.tokens[:, -1] - task.first_query
    assert torch.equal(pair // task.n_values, query_key) and torch.equal(
        pair % task.n_values, a.answer
    )
    is_pair = (a.tokens[:, :-1] >= task.n_filler) & (a.tokens[:, :-1] < task.first_query)
    assert (is_pair.sum(1) == task.n_pairs).all()
    keys = (a.tokens[:, :-1] - task.n_filler) // task.n_values
    for i in range(20):  # the keys of one example are distinct
        assert keys[i][is_pair[i]].unique().numel() == task.n_pairs
    distance = task.L - 1 - a.position
    assert int(distance.min()) >= 1 and int(distance.max()) <= task.L - 1


def test_recall_model_is_the_masked_layer_read_at_the_last_position():
    task = recall.RecallTask()
    tokens = recall.make_recall(8, task, seed=0).tokens
    for name, mask in recall.recall_patterns(task.L).items():
        torch.manual_seed(0)
        model = recall.RecallModel(mask[-1], task.vocab_size, task.n_values, d=16)
        with torch.no_grad():
            x = model.embed(tokens)  # (B, L, d): the whole layer, every row of the mask
            out = att_acc.scaled_dot_product_attention(
                model.W_q(x), model.W_k(x), model.W_v(x), mask=mask
            )  # (B, L, d)
            want = model.readout(x[:, -1] + out[:, -1])
            torch.testing.assert_close(model(tokens), want, msg=name)
        assert model.seen.numel() == int(mask[-1].sum())


def test_recall_patterns_reach_what_their_last_row_says():
    seen = {name: np.flatnonzero(m[-1].numpy()) for name, m in recall.recall_patterns(128).items()}
    assert seen["dense (causal)"].tolist() == list(range(128))
    assert seen["sliding window w=32"].tolist() == list(range(95, 128))
    assert seen["Longformer w=32 + global query"].tolist() == list(range(128))
    assert seen["Transformer-XL seg 32, mem 32"].tolist() == list(range(64, 128))
    assert set(range(112, 128)) <= set(seen["strided l=16"]) and 15 in seen["strided l=16"]
    assert 0 not in seen["strided l=16"] and 0 not in seen["fixed l=16, c=2"]


@pytest.mark.slow
def test_a_window_cannot_answer_beyond_its_reach_but_dense_and_global_can():
    """The claim of the notebook's task section, with margins that hold on any CPU: questions
    whose pair is outside the window stay at chance (1/8; about 1000 such questions, so the
    binomial standard deviation is 0.01), while dense attention and a global query answer them."""
    task = recall.RecallTask()
    test = recall.make_recall(2000, task, seed=1)
    patterns = recall.recall_patterns(task.L)
    threads = torch.get_num_threads()
    result = {}
    for name in ("sliding window w=32", "dense (causal)", "Longformer w=32 + global query"):
        model, losses = recall.train_recall(patterns[name], task)
        assert torch.get_num_threads() == threads  # restored
        assert len(losses) == 300 and np.isfinite(losses).all()
        result[name] = recall.evaluate_recall(model, test)
    window = result["sliding window w=32"]
    assert window["acc_unreachable"] < task.chance + 0.05 and window["d 64+"] < task.chance + 0.05
    assert window["acc_reachable"] > 0.5  # it did learn: what it can see, it answers
    for name in ("dense (causal)", "Longformer w=32 + global query"):
        assert result[name]["reachable"] == 1.0 and result[name]["d 64+"] > 0.6, name


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (
            lambda: recall.RecallTask(n_pairs=9),
            ValueError,
            "n_pairs=9 pairs need as many distinct keys",
        ),
        (lambda: recall.RecallTask(n_values=1), ValueError, "n_values must be at least 2"),
        (lambda: recall.make_recall(0), ValueError, "n must be at least 1"),
        (lambda: recall.make_recall(2, task=128), TypeError, "task must be a RecallTask"),
        (lambda: recall.train_recall(torch.ones(64, 64, dtype=torch.bool)), ValueError, "L=128"),
        (lambda: recall.train_recall(torch.ones(128, 128)), ValueError, "boolean (L, L)"),
        (
            lambda: recall.train_recall(torch.zeros(128, 128, dtype=torch.bool)),
            ValueError,
            "last row is empty",
        ),
        (lambda: recall.recall_patterns(100), ValueError, "multiple of 16"),
        (
            lambda: recall.evaluate_recall(
                recall.RecallModel(torch.ones(8, dtype=torch.bool), 88, 8), recall.make_recall(2)
            ),
            ValueError,
            "data.tokens must be (N, L=8)",
        ),
    ],
)
def test_recall_bad_input_is_a_clear_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)
