"""What a policy sees of the market: the runs it may count, and which of them began before the
history did (left-censored: their age, and their length once they end, are only lower bounds)."""

from __future__ import annotations

from spotfit.market.view import MarketView
from tests.support.traces import make_trace


def test_the_historys_first_run_is_left_out_of_whole_runs():
    # Up for 3 ticks from before the history began, down 2, up 4, down 1, up now.
    view = MarketView.of_trace(make_trace([[1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1]]), 11)
    assert view.up_runs("z0").tolist() == [3, 4]
    assert view.up_runs("z0", whole=True).tolist() == [4]  # the 3 is at least 3
    assert view.down_runs("z0", whole=True).tolist() == [2, 1]  # every down run began in sight
    assert view.seen_start("z0") and view.run_ticks("z0") == 2
    assert view.first_run("z0") == (True, 3)  # up, and for at least 3 ticks


def test_a_run_up_since_the_historys_first_tick_has_no_seen_start():
    view = MarketView.of_trace(make_trace([[0, 0, 1, 1], [1, 1, 1, 1]]), 3)
    assert view.seen_start("z0") and not view.seen_start("z1")
    assert view.down_runs("z0").tolist() == [2] and view.down_runs("z0", whole=True).size == 0
    assert view.run_ticks("z1") == 4  # a lower bound on its age
    assert view.first_run("z0") == (False, 2) and view.first_run("z1") is None  # z1's still lasts
