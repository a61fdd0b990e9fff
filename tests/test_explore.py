"""The explorers' stages against the notebooks' pipeline, their pictures, and their widgets (no browser)."""

from __future__ import annotations

import math

import pytest
import torch

from litrepro.explore import rlbp as xr


@pytest.fixture(scope="module")
def rlbp_run():
    from litrepro.rlbp import experiment as rlbp
    from litrepro.rlbp.config import RLBPConfig

    return rlbp.run(RLBPConfig(seed=42, device="cpu"), "cpu", sweep=False)


def test_rlbp_explorer_critic_and_actor_are_the_notebooks(rlbp_run):
    """The explorer's cheaper critic (no control) and its actor at lambda_cpc equal the notebook pipeline's."""
    key = xr.BaseKey(seed=42)
    b = xr.base(key)
    assert sum(b["critic_report"]["heldout_after"]) == rlbp_run["metrics"]["td_loss_after"]
    assert b["critic_report"]["td_loss_value"] == rlbp_run["curves"]["td_loss_value"]
    _, report = xr.actor(key, b["cfg"].lambda_cpc)
    assert report["gradient_norms"][0] == rlbp_run["metrics"]["actor_gradient_norm"]


def test_rlbp_explorer_lambda_moves_the_fused_argmax_only_through_lambda():
    key = xr.BaseKey(seed=42)
    value0, fused0 = xr.argmaxes(key, 0.0)
    assert torch.equal(value0, fused0)                       # lambda 0: fused is value-only
    value4, fused4 = xr.argmaxes(key, 4.0)
    assert torch.equal(value0, value4) and not torch.equal(value4, fused4)


def test_rlbp_explorer_campaign_day_is_the_chosen_kind_and_held_out():
    key = xr.BaseKey(seed=42)
    world = xr.base(key)["world"]
    for kind in xr.KINDS:
        day = xr.campaign_day(key, 1.0, 3, kind)
        assert day["kind"] == kind
        assert bool(xr.rlbp.heldout_campaigns(world)[day["campaign"]])
        fixed = day["policies"]["fixed gain"]
        assert len(set(zip(fixed["kp"], fixed["ki"]))) == 1            # the fixed gain never changes its gains


def test_rlbp_explorer_redraws_on_a_control_change():
    ex = xr.Explorer()
    first = ex.numbers.value
    assert "λ=1" in first and ex.last_redraw_s is not None
    ex.controls["lam"].value = 4.0
    assert ex.numbers.value != first and "λ=4" in ex.numbers.value
    assert not [o for o in ex.picture.outputs if o.get("output_type") == "error"]
