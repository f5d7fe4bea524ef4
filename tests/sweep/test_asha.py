"""ASHA's decisions: rungs, the top share, and the final rung rule."""

from __future__ import annotations

from spotfit.sweep import asha


def test_rungs_are_powers_of_the_reduction_factor():
    assert [e for e in range(1, 100) if asha.is_rung(e)] == [1, 3, 9, 27, 81]


def test_a_rung_keeps_its_best_third_in_either_direction():
    values = {0: 0.1, 1: 0.9, 2: 0.5, 3: 0.7, 4: 0.3, 5: 0.8}
    assert [t for t in values if asha.promotable(values, t, "max")] == [1, 5]
    assert [t for t in values if asha.promotable(values, t, "min")] == [0, 4]


def test_too_few_values_promote_nobody_until_the_rung_is_final():
    values = {0: 0.9, 1: 0.5}
    assert not any(asha.promotable(values, t, "max") for t in values)
    assert [t for t in values if asha.promotable(values, t, "max", final=True)] == [0]


def test_ties_go_to_the_earlier_trial():
    values = {3: 0.5, 1: 0.5, 2: 0.5}
    assert [t for t in values if asha.promotable(values, t, "max")] == [1]
