"""Chapter 10 (Learning from human feedback and distillation): hand-derived values, parity with an established library, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import expit, log_softmax, softmax
from scipy.stats import entropy

from course_lib.feedback import accelerated as acc
from course_lib.feedback import exercises as check
from course_lib.feedback import pipeline as P
from course_lib.feedback import ppo
from course_lib.feedback import reference as ref
from course_lib.feedback import tasks as T

BOTH = [ref, acc]


def _np(x):
    return x.detach().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


# ------------------------------------------------------------------------ losses, by hand
@pytest.mark.parametrize("lib", BOTH)
def test_pairwise_loss_is_minus_log_sigmoid_of_the_gap(lib):
    rw, rl = np.array([1.0, 0.5, -2.0]), np.array([0.0, 1.5, -2.0])
    # by hand: -log sigmoid(1), -log sigmoid(-1), -log sigmoid(0) = log 2
    want = np.mean([math.log(1 + math.exp(-1)), math.log(1 + math.exp(1)), math.log(2)])
    assert float(lib.pairwise_loss(rw, rl)) == pytest.approx(want, rel=1e-12)
    assert float(lib.pairwise_loss(rw, rl)) == pytest.approx(-np.mean(np.log(expit(rw - rl))))
    assert float(lib.pairwise_loss(np.array([-800.0]), np.array([0.0]))) == pytest.approx(800.0)


@pytest.mark.parametrize("lib", BOTH)
def test_masked_nll_counts_only_response_tokens(lib):
    logits = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]]))
    targets = np.array([0, 1, 2])
    mask = np.array([0.0, 1.0, 1.0])
    want = -(math.log(0.8) + math.log(0.5)) / 2
    assert float(lib.masked_nll(logits, targets, mask)) == pytest.approx(want, rel=1e-12)
    everything = -(math.log(0.7) + math.log(0.8) + math.log(0.5)) / 3
    assert float(lib.masked_nll(logits, targets, np.ones(3))) == pytest.approx(
        everything, rel=1e-12
    )


def test_masked_nll_with_a_full_mask_is_pytorchs_cross_entropy():
    rng = np.random.default_rng(0)
    z, t = rng.standard_normal((3, 5, 6)), rng.integers(0, 6, (3, 5))
    want = torch.nn.functional.cross_entropy(
        torch.tensor(z).reshape(-1, 6), torch.tensor(t).reshape(-1)
    )
    assert float(ref.masked_nll(z, t, np.ones((3, 5)))) == pytest.approx(float(want), rel=1e-12)


@pytest.mark.parametrize("lib", BOTH)
@pytest.mark.parametrize("kind", ["k1", "k3"])
def test_kl_estimate_averaged_under_the_policy_is_the_exact_kl(lib, kind):
    # On a vocabulary of 5, average the per-token estimate over every token weighted by the
    # policy's probability: the expectation must equal KL(pi || pi_ref) computed by scipy.
    rng = np.random.default_rng(1)
    for _ in range(5):
        lp, lq = log_softmax(rng.standard_normal(5) * 2), log_softmax(rng.standard_normal(5) * 2)
        expected = np.sum(np.exp(lp) * _np(lib.kl_penalty(lp, lq, kind)))
        assert expected == pytest.approx(entropy(np.exp(lp), np.exp(lq)), rel=1e-10)


def test_k3_is_never_negative_but_k1_can_be():
    lp, lq = np.log([0.2, 0.8]), np.log([0.5, 0.5])
    assert (ref.kl_penalty(lp, lq, "k3") >= 0).all()
    assert (ref.kl_penalty(lp, lq, "k1") < 0).any()


@pytest.mark.parametrize("lib", BOTH)
def test_ppo_objective_equals_the_unclipped_one_inside_the_range(lib):
    rng = np.random.default_rng(2)
    old = -np.abs(rng.standard_normal(50))
    new = old + rng.uniform(np.log(0.81), np.log(1.19), 50)  # ratios inside [0.8, 1.2]
    adv = rng.standard_normal(50)
    np.testing.assert_allclose(
        _np(lib.ppo_clip_objective(new, old, adv, 0.2)), np.exp(new - old) * adv, rtol=1e-6
    )


def test_ppo_gradient_vanishes_where_the_ratio_is_clipped():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5], dtype=torch.float64))
    new = torch.log(torch.tensor([0.7, 0.3, 0.55, 0.3], dtype=torch.float64)).requires_grad_()
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    acc.ppo_clip_objective(new, old, adv, 0.2).sum().backward()
    # ratios 1.4 (A > 0: clipped), 0.6 (A < 0: clipped), 1.1 (inside), 0.6 (A > 0: not clipped)
    np.testing.assert_allclose(new.grad.numpy(), [0.0, 0.0, 1.1, 0.6], rtol=1e-12)


@pytest.mark.parametrize("lib", BOTH)
def test_gae_limits_and_a_hand_example(lib):
    r, v = np.array([0.0, 0.0, 1.0]), np.array([0.2, 0.4, 0.6])
    # lam = 0: one-step TD errors r_t + gamma V_{t+1} - V_t
    np.testing.assert_allclose(
        _np(lib.gae(r, v, 0.9, 0.0)), [0.9 * 0.4 - 0.2, 0.9 * 0.6 - 0.4, 1.0 - 0.6]
    )
    # lam = 1: discounted return minus value
    ret = np.array([0.81, 0.9, 1.0])
    np.testing.assert_allclose(_np(lib.gae(r, v, 0.9, 1.0)), ret - v)
    # lam = 0.5, gamma = 1, by hand: deltas (0.2, 0.2, 0.4); A2 = 0.4, A1 = 0.4, A0 = 0.4
    np.testing.assert_allclose(_np(lib.gae(r, v, 1.0, 0.5)), [0.4, 0.4, 0.4])


@pytest.mark.parametrize("lib", BOTH)
def test_gae_with_lambda_one_and_gamma_one_is_returns_minus_values(lib):
    rng = np.random.default_rng(3)
    r, v = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    returns = np.cumsum(r[:, ::-1], axis=1)[:, ::-1]  # sum_{k >= t} r_k
    np.testing.assert_allclose(_np(lib.gae(r, v, 1.0, 1.0)), returns - v, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------- PPO with a value head
def test_per_token_rewards_sum_to_instructgpts_reward():
    g = torch.Generator().manual_seed(0)
    logp, logp_ref = -torch.rand(3, 5, generator=g), -torch.rand(3, 5, generator=g)
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    score = torch.tensor([1.0, 0.0, 0.5])
    r = ppo.per_token_rewards(score, logp, logp_ref, mask, beta=0.2)
    # eq. 2: the score minus beta times the summed log ratio; nothing after the response ends
    torch.testing.assert_close(r.sum(1), score - 0.2 * ((logp - logp_ref) * mask).sum(1))
    assert float(r[0, 3:].abs().sum()) == 0.0
    torch.testing.assert_close(r[0, 2], score[0] - 0.2 * (logp[0, 2] - logp_ref[0, 2]))


def test_returns_are_reward_to_go_and_advantages_are_returns_minus_values():
    g = torch.Generator().manual_seed(1)
    rewards, values = torch.randn(2, 4, generator=g), torch.randn(2, 4, generator=g)
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 1, 1]])
    adv, ret = ppo.advantages_and_returns(rewards, values, mask, 1.0, 1.0, normalise=False)
    to_go = torch.flip(torch.cumsum(torch.flip(rewards * mask, [1]), 1), [1]) * mask
    torch.testing.assert_close(ret, to_go)
    torch.testing.assert_close(adv, (to_go - values) * mask)
    white, _ = ppo.advantages_and_returns(rewards, values, mask, 1.0, 0.95)
    picked = white[mask.bool()]
    assert abs(float(picked.mean())) < 1e-6 and float(picked.std(unbiased=False)) == pytest.approx(
        1, abs=1e-4
    )


def test_value_loss_by_hand_and_its_clipping():
    v, old, ret, m = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0]), torch.ones(1)
    assert float(ppo.value_loss(v, old, ret, m, clip=None)) == pytest.approx(0.5)
    # clipped: V_old + 0.2 = 0.2 is 1.8 from the return; the pessimistic max keeps 0.5 * 1.8^2
    assert float(ppo.value_loss(v, old, ret, m, clip=0.2)) == pytest.approx(0.5 * 1.8**2)


def _fixed_batch(seed=0):
    pol = P.make_policy(seed)
    ac = ppo.ActorCritic(pol)
    tokens, mask = P.sample(pol, [w + "=" for w in WORDS[:16]], seed=seed)
    with torch.no_grad():
        logp_old, values_old = ac(tokens, P.PROMPT_LEN)
    g = torch.Generator().manual_seed(seed)
    # targets a value head can fit: 1 at the first generated token, growing along the answer
    returns = (1.0 + 0.25 * torch.arange(mask.shape[1])) * mask
    adv = torch.randn(mask.shape, generator=g) * mask
    return ac, (tokens, P.PROMPT_LEN, mask, logp_old, values_old, adv, returns)


def test_actor_critic_gives_the_policys_logprobs_and_zero_values_at_the_start():
    ac, (tokens, plen, *_rest) = _fixed_batch()
    logp, values = ac(tokens, plen)
    torch.testing.assert_close(logp, P.sequence_logprobs(ac.policy, tokens, plen))
    assert values.shape == logp.shape and float(values.detach().abs().max()) == 0.0


def test_gradients_reach_the_value_head_and_the_policy():
    ac, batch = _fixed_batch()
    loss, policy_loss, v_loss = ppo.ppo_loss(ac, *batch)
    loss.backward()
    assert float(ac.value_head.weight.grad.abs().sum()) > 0
    assert float(ac.value_head.bias.grad.abs()) > 0
    assert float(ac.policy.tok_emb.grad.abs().sum()) > 0
    torch.testing.assert_close(loss, policy_loss + 0.5 * v_loss)


@pytest.mark.portability
def test_value_loss_decreases_on_a_fixed_batch():
    ac, batch = _fixed_batch()
    opt = torch.optim.Adam(ac.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        _, _, v_loss = ppo.ppo_loss(ac, *batch, value_clip=None)
        losses.append(float(v_loss.detach()))
        opt.zero_grad()
        v_loss.backward()
        opt.step()
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.parametrize("advantage", ["gae", "loo"])
def test_rl_runs_are_deterministic(advantage):
    pol = P.make_policy(0)
    runs = [
        P.train_rl(pol, WORDS[:100], _exact, iterations=3, seed=4, advantage=advantage)[1]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert (len(runs[0].value_loss) == 3) == (advantage == "gae")


def test_train_rl_names_a_bad_advantage():
    with pytest.raises(ValueError, match="advantage"):
        P.train_rl(P.make_policy(0), WORDS[:20], _exact, iterations=1, advantage="value")


@pytest.mark.parametrize("lib", BOTH)
def test_dpo_is_the_pairwise_loss_of_the_implicit_reward(lib):
    rng = np.random.default_rng(3)
    pw, pl, qw, ql = (rng.standard_normal(7) for _ in range(4))
    beta = 0.3
    want = ref.pairwise_loss(beta * (pw - qw), beta * (pl - ql))
    assert float(lib.dpo_loss(pw, pl, qw, ql, beta)) == pytest.approx(float(want), rel=1e-10)
    # by hand: policy = reference gives log 2
    assert float(lib.dpo_loss(pw, pl, pw, pl, beta)) == pytest.approx(math.log(2))


@pytest.mark.parametrize("lib", BOTH)
def test_distillation_loss_is_t_squared_times_scipys_kl(lib):
    rng = np.random.default_rng(4)
    zs, zt = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    for t in (1.0, 3.0):
        want = (
            t
            * t
            * np.mean(
                [entropy(softmax(a / t), softmax(b / t)) for a, b in zip(zt, zs, strict=True)]
            )
        )
        assert float(lib.distillation_loss(zs, zt, t)) == pytest.approx(want, rel=1e-6)


def test_the_t_squared_factor_keeps_the_gradient_scale():
    # For large T the gradient of T^2 KL tends to (z_s - z_t)/V after centring (Hinton et al. 2015).
    rng = np.random.default_rng(5)
    zt = torch.tensor(rng.standard_normal(6))
    zs = torch.tensor(rng.standard_normal(6), requires_grad=True)
    acc.distillation_loss(zs[None], zt[None], 500.0).backward()
    d = (zs - zt).detach()
    np.testing.assert_allclose(zs.grad.numpy(), ((d - d.mean()) / 6).numpy(), atol=5e-4)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("lib", BOTH)
def test_bad_inputs_name_the_argument(lib):
    with pytest.raises(ValueError, match="r_rejected"):
        lib.pairwise_loss(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="kind"):
        lib.kl_penalty(np.zeros(2), np.zeros(2), "k2")
    with pytest.raises(ValueError, match="clip"):
        lib.ppo_clip_objective(np.zeros(2), np.zeros(2), np.zeros(2), 0.0)
    with pytest.raises(TypeError, match="targets"):
        lib.token_logprobs(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="lam"):
        lib.gae(np.zeros(2), np.zeros(2), 1.0, 1.5)
    with pytest.raises(ValueError, match="temperature"):
        lib.distillation_loss(np.zeros((1, 2)), np.zeros((1, 2)), 0.0)
    with pytest.raises(ValueError, match="beta"):
        lib.dpo_loss(*(np.zeros(2),) * 4, beta=-1.0)


def test_a_mask_that_selects_nothing_is_refused():
    with pytest.raises(ValueError, match="mask"):
        ref.masked_nll(np.zeros((2, 3)), np.zeros(2, dtype=int), np.zeros(2))


# -------------------------------------------------------------------------------- tasks
def test_judge_grade_and_the_flawed_reward():
    assert T.judge("abcd", "dcba.") and not T.judge("abcd", "dcba") and not T.judge("abcd", "abcd.")
    assert T.grade("abcd", "dcba.") == 1.0 and T.grade("abcd", "dcb.") == 0.75
    assert T.grade("abcd", "dcbaa.") == 0.8 and T.grade("abcd", "dcba") == 0.75
    # the flaw: a long wrong answer beats the right one
    assert T.flawed_reward("abcd", "dcbaeeee") > T.flawed_reward("abcd", "dcba.")


def test_words_and_pairs_are_deterministic_and_ranked():
    assert T.reverse_words(5) == T.reverse_words(5, seed=0) and len(set(T.reverse_words())) == 6**4
    pairs = T.preference_pairs(T.reverse_words(50), k=4, seed=0)
    assert pairs == T.preference_pairs(T.reverse_words(50), k=4, seed=0)
    assert all(T.grade(w, a) > T.grade(w, b) for w, a, b in pairs)
    assert len(pairs) <= 50 * 6


def _right_gae(rewards, values, mask, gamma, lam):
    return ppo.advantages_and_returns(rewards, values, mask, gamma, lam, normalise=False)[0]


def _gae_variant(mask_next_value, reset_running):
    def fn(rewards, values, mask, gamma, lam):
        return check._gae_loop(
            rewards, values, mask, gamma, lam,
            mask_next_value=mask_next_value, reset_running=reset_running,
        )  # fmt: skip

    return fn


@pytest.mark.parametrize(
    "fn",
    [
        _right_gae,
        _gae_variant(True, True),
        lambda r, v, m, g, lam: _right_gae(r, v, m, g, lam).numpy(),  # a NumPy array
        lambda r, v, m, g, lam: _right_gae(r, v, m, g, lam).tolist(),  # nested lists
        lambda r, v, m, g, lam: _right_gae(r.float(), v.float(), m.float(), g, lam),  # float32
        lambda r, v, m, g, lam: _right_gae(r, v * m, m, g, lam) * m,  # values masked twice
    ],
)
def test_masked_gae_checker_accepts_every_right_form(fn):
    assert check.masked_gae(fn), str(check.masked_gae(fn))


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_gae_variant(False, False), "the value after it is 0"),  # the exercise's bug
        (_gae_variant(True, False), "still carries the padding"),  # half of the fix
        (_gae_variant(False, True), "value at the padding position"),  # the other half
        (lambda r, v, m, g, lam: _right_gae(r, v, m, g, 0.0), "one-step TD errors"),
        (lambda r, v, m, g, lam: acc.gae(r * m, v * m, g, 1.0) * m, "gamma * lam"),
    ],
)
def test_masked_gae_checker_names_each_mistake(fn, words):
    out = check.masked_gae(fn)
    assert not out and words in str(out), str(out)


LOO_MISTAKES = [
    (lambda t: t - t.mean(1, keepdims=True), "your own answer"),
    (lambda t: t - (t.sum(1, keepdims=True) - t) / t.shape[1], "k - 1"),
    (lambda t: (t.sum(1, keepdims=True) - t) / (t.shape[1] - 1) - t, "sign is flipped"),
    (lambda t: -(t.sum(1, keepdims=True) - t) / (t.shape[1] - 1), "dropped the answer's own"),
    (lambda t: t - t.mean(), "per prompt"),  # right on one prompt, wrong on several
]


@pytest.mark.parametrize(("fn", "words"), LOO_MISTAKES)
def test_loo_checker_names_each_mistake(fn, words):
    out = check.loo_advantages(fn)
    assert not out and words in str(out), str(out)


def test_loo_checker_accepts_every_right_form():
    def right(t):
        k = t.shape[1]
        return t - (t.sum(1, keepdims=True) - t) / (k - 1)

    assert check.loo_advantages(right)
    assert check.loo_advantages(lambda t: right(t).tolist())
    assert check.loo_advantages(lambda t: torch.as_tensor(right(t)))
    assert check.loo_advantages(lambda t: right(t).astype(np.float32))
    assert check.loo_advantages(lambda t: ppo.loo_advantages(torch.as_tensor(t)).numpy())


def _no_return(*args):
    pass


def _raises(*args):
    raise RuntimeError("boom")


GARBAGE = [
    (None, "expected a function"),
    (_no_return, "return"),
    (_raises, "RuntimeError"),
    (lambda *a: "text", "str"),
    (lambda *a: b"bytes", "bytes"),
    (lambda *a: (x for x in range(3)), "generator"),
    (lambda *a: float("nan"), "shape"),
    (lambda *a: torch.full((2, 5), float("nan"), dtype=torch.float64), "NaN"),
    (lambda *a: np.zeros((9, 9)), "shape"),
    (lambda x: x, "TypeError"),  # a wrong signature (for masked_gae)
]


@pytest.mark.parametrize(("fn", "words"), GARBAGE)
def test_checkers_answer_garbage_in_words(fn, words):
    out = check.masked_gae(fn)
    assert not out and words in str(out), str(out)
    out = check.loo_advantages(fn)  # one argument: the wrong signature is right here
    assert not out and out.details, str(out)


def test_loo_advantages_by_hand_and_bad_input():
    total = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0]])
    want = torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3], [4 / 3, -4 / 3, 0.0, 0.0]])
    torch.testing.assert_close(ppo.loo_advantages(total), want)
    k = total.shape[1]  # = k / (k - 1) times the total minus the prompt's mean
    torch.testing.assert_close(
        ppo.loo_advantages(total), k / (k - 1) * (total - total.mean(1, keepdim=True))
    )
    with pytest.raises(ValueError, match="total"):
        ppo.loo_advantages(torch.zeros(3, 1))
    with pytest.raises(TypeError, match="total"):
        ppo.loo_advantages(np.zeros((2, 2)))


# ----------------------------------------------------------------------- training runs
WORDS = T.reverse_words()


@pytest.fixture(scope="module")
def sft_policy():
    torch.manual_seed(0)
    pol = P.make_policy(0)
    train = WORDS[:300]
    losses = P.train_sft(pol, [w + "=" for w in train], [w[::-1] + "." for w in train], steps=60)
    return pol, losses


@pytest.mark.portability
def test_sft_learns_to_reverse(sft_policy):
    pol, losses = sft_policy
    assert losses[-1] < 0.35 * losses[0]
    assert P.accuracy(pol, WORDS[1000:1100]) > 0.8


@pytest.mark.portability
def test_unmasked_sft_learns_much_less_in_the_same_steps():
    # the bug: the prompt's random letters are targets too; their loss cannot fall below ~log 6
    pol = P.make_policy(0)
    train = WORDS[:300]
    losses = P.train_sft(
        pol, [w + "=" for w in train], [w[::-1] + "." for w in train], steps=60, mask_prompt=False
    )
    assert np.mean(losses[-5:]) > 0.6 * math.log(6)
    assert P.accuracy(pol, WORDS[1000:1100]) < 0.3


@pytest.mark.portability
def test_reward_model_ranks_held_out_pairs(sft_policy):
    pol, _ = sft_policy
    pairs = T.preference_pairs(WORDS[300:500], seed=1)
    rm, losses = P.train_reward_model(pol, pairs, steps=120, lr=1e-3)
    assert np.mean(losses[-10:]) < math.log(2)
    assert P.pair_accuracy(rm, T.preference_pairs(WORDS[1000:1100], seed=2)) > 0.65


def _exact(ws, rs):
    return np.array([float(T.judge(w, r)) for w, r in zip(ws, rs, strict=True)])


def _flawed(ws, rs):
    return np.array([T.flawed_reward(w, r) for w, r in zip(ws, rs, strict=True)])


@pytest.mark.portability
@pytest.mark.parametrize("advantage", ["gae", "loo"])
def test_rl_raises_reward_and_kl_penalty_stops_hacking(sft_policy, advantage):
    pol, _ = sft_policy
    _, log = P.train_rl(pol, WORDS[:600], _flawed, beta=0.0, iterations=25, advantage=advantage)
    assert np.mean(log.length[-5:]) > 5.5 and np.mean(log.accuracy[-5:]) < 0.2  # hacked
    _, log = P.train_rl(pol, WORDS[:600], _flawed, beta=0.2, iterations=25, advantage=advantage)
    assert np.mean(log.length[-5:]) < 4.6 and np.mean(log.kl[-5:]) < 1.0


@pytest.mark.portability
def test_ppo_with_gae_learns_the_judges_reward_and_its_values(sft_policy):
    pol, _ = sft_policy
    _, log = P.train_rl(pol, WORDS[:600], _exact, beta=0.05, iterations=30, advantage="gae")
    assert np.mean(log.reward[-5:]) > np.mean(log.reward[:5]) + 0.15
    assert np.mean(log.value_loss[-5:]) < 0.7 * np.mean(log.value_loss[:3])
    assert np.mean(log.kl[-5:]) < 1.0


def test_widget_renders_and_reports_bad_input():
    from course_lib.feedback.widget import reward_explorer, scores_html

    assert "True" in scores_html("abcd", "dcba.") and "1.40" in scores_html("abcd", "dcba.")
    with pytest.raises(ValueError, match="word"):
        scores_html("abz", "a.")
    box = reward_explorer("abcd", "dcba.")
    box.children[1].value = "dcbx"  # a character the model cannot write: shown as an error
    assert "outside the vocabulary" in box.children[2].value


@pytest.mark.portability
def test_dpo_improves_sampled_accuracy(sft_policy):
    pol, _ = sft_policy
    pairs = T.preference_pairs(WORDS[300:600], seed=1)
    before = P.sampled_accuracy(pol, WORDS[1000:1100])
    pi, log = P.train_dpo(pol, pairs, beta=0.1, steps=40)
    assert log.loss[0] == pytest.approx(math.log(2), abs=1e-6)  # policy = reference at the start
    assert log.chosen[0] == pytest.approx(0.0, abs=1e-5)  # and both log-ratios are 0
    assert log.rejected[0] == pytest.approx(0.0, abs=1e-5)
    assert len(log.loss) == len(log.chosen) == len(log.rejected) == 40
    assert np.mean(log.loss[-5:]) < log.loss[0]
    assert np.mean(log.chosen[-5:]) > np.mean(log.rejected[-5:])  # the gap the loss asks for
    assert P.sampled_accuracy(pi, WORDS[1000:1100]) > before + 0.1


@pytest.mark.slow
@pytest.mark.portability
def test_rationales_as_a_second_task_teach_the_student():
    strings = T.digit_strings(3)
    seen, unseen = strings[:600], strings[-200:]
    label_only = P.student_accuracy(P.train_student(seen, with_rationale=False), unseen)
    step_by_step = P.student_accuracy(P.train_student(seen, with_rationale=True), unseen)
    assert label_only < 0.3 and step_by_step > label_only + 0.5


def test_student_data_weights_the_rationale_task():
    prompts, responses, weights = P.student_data(["352", "999"], True, rationale_weight=0.5)
    assert prompts == ["352=", "352?", "999=", "999?"]
    assert responses == ["0.", "3,8,0.", "7.", "9,8,7."] and weights == [1.0, 0.5, 1.0, 0.5]
    assert T.digit_example("999") == ("7", "9,8,7")


@pytest.mark.portability
def test_ppo_ptx_anchors_the_policy_without_kl(sft_policy):
    pol, _ = sft_policy
    sft_data = ([w + "=" for w in WORDS[:300]], [w[::-1] + "." for w in WORDS[:300]])
    for advantage, max_length, min_accuracy in (("loo", 4.6, 0.5), ("gae", 5.0, 0.4)):
        _, log = P.train_rl(
            pol, WORDS[:600], _flawed, beta=0.0, iterations=25, ptx=sft_data, ptx_coef=1.0,
            advantage=advantage,
        )  # fmt: skip
        # without PPO-ptx the length is about 7 and no answer is right (the test above)
        assert np.mean(log.length[-5:]) < max_length
        assert np.mean(log.accuracy[-5:]) > min_accuracy


# Not re-run on the alternate code path: it checks the study's plumbing (every run, every
# field, the summary's arithmetic), whose numbers it only asks to be probabilities.
def test_study_runs_every_method_and_summarises_with_standard_errors(tmp_path):
    from course_lib.feedback import study

    tiny = {"seeds": [0, 1], "rm_steps": 3, "ppo_iterations": 2, "dpo_steps": 2,
            "rm_betas": [0.1], "dpo_betas": [0.1], "sft_steps": 5, "ppo_lrs": [1e-3, 3e-3],
            "dpo_lrs": [1e-3], "kl_samples": 1}  # fmt: skip
    record = study.run_study(tiny)
    keys = [(r["method"], r["seed"]) for r in record["runs"]]
    want = [
        (m, s) for m in study.METHODS for s in (0, 1) for _ in range(1 if m == study.DPO else 2)
    ]
    assert sorted(keys) == sorted(want)
    assert [s["seed"] for s in record["sft"]] == [0, 1]
    for run in record["runs"]:
        assert 0 <= run["p_right"] <= 1 and 0 <= run["greedy"] <= 1 and 0 <= run["p_right_val"] <= 1
        fields = ("loss", "chosen", "rejected") if run["method"] == study.DPO else ("reward", "kl")
        assert all(len(run["log"][f]) == 2 for f in fields)
        if run["method"] == study.DPO:
            assert 0 <= run["implicit_accuracy"] <= 1
        if run["method"] == study.RM:
            assert 0 <= run["rm_pair_accuracy"] <= 1 and len(run["log"]["p_right"]) == 2
    rows = study.summarise(record["runs"])
    assert [r["runs"] for r in rows] == [2] * 7
    for row in rows:
        mine = [
            r["p_right"]
            for r in record["runs"]
            if (r["method"], r["lr"]) == (row["method"], row["lr"])
        ]
        se = np.std(mine, ddof=1) / np.sqrt(2)
        assert row["p_right_se"] == pytest.approx(se, abs=1e-4)
        assert row["p_right_min"] <= row["p_right_mean"] <= row["p_right_max"]
    chosen = study.select(rows)
    assert [(r["method"], r["lr_grid"]) for r in chosen][:1] == [(study.RM, [1e-3, 3e-3])]
    assert all(r["lr_at_edge"] for r in chosen if len(r["lr_grid"]) == 2)
    assert not any(r["lr_at_edge"] for r in chosen if len(r["lr_grid"]) == 1)
    out = tmp_path / "study.json"
    study.main([str(out), "--quick"])
    assert study.load_study(out)["config"]["seeds"] == [0]
    assert study.policy_kl(P.make_policy(0), P.make_policy(0), WORDS[:20], samples=2) == 0.0
    with pytest.raises(ValueError, match="methods"):
        study.run_study(tiny, methods=("A2C",))


def test_select_picks_the_best_validation_rate_and_flags_the_grid_edge():
    from course_lib.feedback import study

    runs = [
        {"method": "m", "beta": 1.0, "lr": lr, "seed": s, "p_right": p, "p_right_val": v,
         "greedy": 1.0, "kl": 0.1}
        for lr, p, v in ((1e-4, 0.9, 0.2), (1e-3, 0.5, 0.6), (1e-2, 0.1, 0.3))
        for s in (0, 1)
    ]  # fmt: skip
    (best,) = study.select(study.summarise(runs))
    assert best["lr"] == 1e-3 and not best["lr_at_edge"] and best["p_right_mean"] == 0.5
    (edge,) = study.select(study.summarise([r for r in runs if r["lr"] != 1e-4]))
    assert edge["lr"] == 1e-3 and edge["lr_at_edge"]


def test_exact_probability_of_the_right_answer_matches_sampling():
    pol = P.make_policy(0)
    P.train_sft(pol, [w + "=" for w in WORDS[:300]], [w[::-1] + "." for w in WORDS[:300]], 30)
    words = WORDS[1000:1010]
    exact = P.right_answer_probability(pol, words)
    hits = [P.sampled_accuracy(pol, [w for w in words for _ in range(200)], seed=s) for s in (0, 1)]
    assert abs(np.mean(hits) - exact) < 0.03  # 4000 samples: a standard error of about 0.008
    by_hand = np.mean([float(P.answer_logprob(pol, [w], [w[::-1] + "."]).exp()) for w in words])
    assert exact == pytest.approx(by_hand, rel=1e-5)


def test_implicit_reward_accuracy_of_the_reference_is_zero_and_of_a_dpo_policy_high():
    pol = P.make_policy(0)
    P.train_sft(pol, [w + "=" for w in WORDS[:300]], [w[::-1] + "." for w in WORDS[:300]], 30)
    pairs = T.preference_pairs(WORDS[300:400], k=4, seed=1)
    held_out = T.preference_pairs(WORDS[1000:1100], k=4, seed=2)
    assert P.implicit_reward_accuracy(pol, pol, held_out) == 0.0  # every gap is 0: no strict win
    dpo, _ = P.train_dpo(pol, pairs, beta=0.3, steps=30)
    assert P.implicit_reward_accuracy(dpo, pol, held_out) > 0.6


def test_the_shipped_study_has_every_run_and_its_command():
    from course_lib.feedback import study

    shipped = study.load_study()
    cfg = shipped["config"]
    assert shipped["command"] == study.COMMAND and cfg == study.CONFIG
    lrs = {study.DPO: cfg["dpo_lrs"]}
    want = {
        (study.RM, b, lr, s) for b in cfg["rm_betas"] for lr in cfg["ppo_lrs"] for s in cfg["seeds"]
    }
    want |= {
        (study.DPO, b, lr, s)
        for b in cfg["dpo_betas"]
        for lr in lrs[study.DPO]
        for s in cfg["seeds"]
    }
    want |= {
        (m, cfg["judge_beta"], lr, s)
        for m in (study.JUDGE, study.JUDGE_LOO)
        for lr in cfg["ppo_lrs"]
        for s in cfg["seeds"]
    }
    assert {(r["method"], r["beta"], r["lr"], r["seed"]) for r in shipped["runs"]} == want
    assert len(cfg["seeds"]) >= 3 and [s["seed"] for s in shipped["sft"]] == cfg["seeds"]
    for run in shipped["runs"]:
        assert 0 <= run["p_right"] <= 1 and 0 <= run["p_right_val"] <= 1
        n = cfg["dpo_steps"] if run["method"] == study.DPO else cfg["ppo_iterations"]
        assert all(len(v) == n for v in run["log"].values())
