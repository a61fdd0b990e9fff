"""The market's campaign draws against the specification in ``simulator.make_campaigns``'s docstring.

The fifth unseen fault audit's R03 drew the target-CPC margin with the width of the budget-share range
(``m = MARGIN_lo + (BETA_hi − BETA_lo) U``): 60 reported figures moved and no check turned false, because every
check reads the margin from the drawn campaigns. This test holds the draws to the specification, written
here as literals, not read from the module's constants, and recomputes the budget and the target CPC from
the drawn parts with formulas of its own.
"""

import torch

from litrepro.rlbp import simulator

#: The docstring's table: kind -> ((beta lo, hi), (m lo, hi)).
SPEC = {"cpc_constrained": ((0.70, 1.00), (0.55, 0.85)),
        "budget_constrained": ((0.10, 0.25), (1.30, 1.80)),
        "unconstrained": ((0.25, 0.45), (1.30, 1.80))}
N, STEPS, OPPORTUNITIES = 20_000, 24, 8


def market_problems(c: simulator.Campaigns) -> list[str]:
    """Each departure of drawn campaigns from :data:`SPEC` and from the budget and target-CPC formulas."""
    out = []
    for k, name in enumerate(simulator.KINDS):
        sel = c.kind == k
        share = float(sel.double().mean())
        if abs(share - (0.5 if k == 0 else 0.25)) > 0.02:
            out.append(f"{name}: share {share:.3f}")
        for what, drawn, (lo, hi) in (("beta", c.budget_share[sel], SPEC[name][0]), ("m", c.target_margin[sel], SPEC[name][1])):
            width = hi - lo
            if float(drawn.min()) < lo or float(drawn.max()) > hi:
                out.append(f"{name}: {what} outside [{lo}, {hi}]")
            if float(drawn.min()) > lo + 0.01 * width or float(drawn.max()) < hi - 0.01 * width:
                out.append(f"{name}: {what} spans [{float(drawn.min()):.3f}, {float(drawn.max()):.3f}], not [{lo}, {hi}]")
    live = c.traffic.sum(0) * OPPORTUNITIES                                       # (C,) expected live opportunities
    if not torch.allclose(c.budget, c.budget_share * live * c.price_scale, rtol=1e-12):
        out.append("budget is not beta x expected live opportunities x price scale")
    ctr = 1 / (1 + torch.exp(-c.ctr_logit))
    if not torch.allclose(c.target_cpc, c.target_margin * c.price_scale / ctr, rtol=1e-12):
        out.append("target CPC is not m x price scale / CTR")
    return out


def _draw() -> simulator.Campaigns:
    return simulator.make_campaigns(N, STEPS, OPPORTUNITIES, torch.Generator().manual_seed(0), torch.device("cpu"))


def test_campaign_draws_follow_the_specified_market():
    assert market_problems(_draw()) == []


def test_a_margin_drawn_with_the_budget_shares_width_fails(monkeypatch):
    """R03: the margin's width taken from ``BETA`` (a copy-paste slip) is named."""
    beta, margin = simulator.BETA, simulator.MARGIN.clone()
    margin[:, 1] = margin[:, 0] + (beta[:, 1] - beta[:, 0])
    monkeypatch.setattr(simulator, "MARGIN", margin)
    problems = market_problems(_draw())
    assert any(p.startswith("budget_constrained: m spans") for p in problems), problems
    assert not any(p.startswith("cpc_constrained: m") for p in problems)     # equal widths there: nothing to see


def test_a_target_cpc_without_the_ctr_fails(monkeypatch):
    real = simulator.make_campaigns

    def no_ctr(*a, **k):
        c = real(*a, **k)
        return simulator.Campaigns(**{**c.__dict__, "target_cpc": c.target_margin * c.price_scale})
    problems = market_problems(no_ctr(N, STEPS, OPPORTUNITIES, torch.Generator().manual_seed(0), torch.device("cpu")))
    assert "target CPC is not m x price scale / CTR" in problems
