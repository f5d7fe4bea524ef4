"""Trace loading, validation and per-zone statistics."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from spotfit.errors import TraceError
from spotfit.market.trace import load_trace, resolve_trace, run_lengths, zone_stats
from tests.support.traces import make_trace, write_csv

HEADER = "tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h\n"


def test_bundled_trace_loads_by_name_and_file_name():
    trace = load_trace("aws-v100")
    assert trace.gap_s == 195 and trace.n_ticks == 20158 and len(trace.zones) == 9
    assert resolve_trace("aws_p3.2xlarge_v100_avail_2023-02-15_9zones.csv.gz") == resolve_trace("aws-v100")
    stats = {s.zone: s for s in zone_stats(trace)}
    assert round(stats["us-east-1a"].availability, 2) == 0.17
    assert round(stats["us-west-2b"].availability, 2) == 0.90
    assert 0.9 < stats["us-west-2b"].spot_min_usd_per_h < stats["us-west-2b"].spot_max_usd_per_h < 1.9


def test_plain_and_gzipped_files_load_the_same(tmp_path):
    trace = make_trace([[1, 1, 0, 0, 1], [0, 1, 1, 1, 1]], spot=[[1, 2, 3, 4, 5]] * 2)
    plain = write_csv(tmp_path / "t.csv", trace)
    packed = tmp_path / "t.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = load_trace(plain), load_trace(packed)
    assert a.zones == b.zones == ("z0", "z1") and a.gap_s == b.gap_s == 60
    assert np.array_equal(a.available, trace.available) and np.array_equal(b.spot_usd_per_h, trace.spot_usd_per_h)
    assert load_trace(plain, gap_s=195).gap_s == 195


def test_availability_counts_above_one_mean_available(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,2023-01-01 00:00:00,a,3,1,3\n1,2023-01-01 00:01:00,a,0,1,3\n")
    assert load_trace(path).available.tolist() == [[True, False]]


def test_stats_of_a_hand_made_zone():
    trace = make_trace([[1, 1, 0, 0, 0, 1, 1, 1, 1, 0]], gap_s=3600)
    (s,) = zone_stats(trace)
    assert s.availability == 0.6 and s.preemptions == 2
    assert s.mean_up_h == 3.0 and s.mean_down_h == 2.0 and s.mtbf_h == 3.0
    ups, downs = run_lengths(trace.available[0])
    assert ups.tolist() == [2, 4] and downs.tolist() == [3, 1]


@pytest.mark.parametrize("body, words", [
    ("", "empty"),
    ("tick,timestamp,zone,available\n0,2023-01-01 00:00:00,a,1\n", "Unknown trace format"),
    (HEADER, "no data rows"),
    (HEADER + "0,2023-01-01 00:00:00,a,1,1\n", "fields"),
    (HEADER + "0,2023-01-01 00:00:00,a,yes,1,3\n1,2023-01-01 00:01:00,a,1,1,3\n", "row 2 has a bad available"),
    (HEADER + "0,2023-01-01 00:00:00,a,1,-1,3\n1,2023-01-01 00:01:00,a,1,1,3\n", "spot_price_usd_per_h"),
    (HEADER + "0,2023-01-01 00:00:00,a,1,1,3\n2,2023-01-01 00:01:00,a,1,1,3\n", "tick 2"),
    (HEADER + "0,2023-01-01 00:00:00,a,1,1,3\n1,2023-01-01 00:01:00,a,1,1,3\n0,2023-01-01 00:00:00,b,1,1,3\n", "rows"),
    (HEADER + "0,yesterday,a,1,1,3\n1,2023-01-01 00:01:00,a,1,1,3\n", "row 2 has a bad timestamp"),
    (HEADER + "0,2023-01-01 00:02:00,a,1,1,3\n1,2023-01-01 00:01:00,a,1,1,3\n", "not after"),
    (HEADER + "0,2023-01-01 00:00:00,a,1,1,3\n", "cannot be inferred"),
])
def test_malformed_traces_raise_one_clear_line(tmp_path, body, words):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceError) as err:
        load_trace(path)
    message = err.value.message
    assert words in message, message
    assert "expected" in message and "\n" not in message
    assert err.value.hint and err.value.exit_code == 2


def test_a_file_that_is_no_trace_is_named_by_its_path_and_never_quoted(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.write_text("root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n")
    with pytest.raises(TraceError) as err:
        load_trace(shadow)
    message = err.value.message
    assert "root:" not in message and "20228" not in message and "daemon" not in message, message
    assert str(shadow) in message and "tick,timestamp,zone,available" in message


def test_a_bad_row_is_named_by_its_number_not_its_content(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "0,2023-01-01 00:00:00,a,1,1,3\n1,secret-value,a,1,1\n")
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert "row 3 has 5 fields" in err.value.message and "secret-value" not in err.value.message


def test_unknown_trace_and_zone_are_usage_errors(tmp_path):
    with pytest.raises(TraceError, match="aws-v100"):
        resolve_trace(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="us-east-1a"):
        load_trace("aws-v100").select(["mars-1a"])


COUNTS = "dataset,tick,gap_seconds,zone,requested_nodes,available_nodes\n"


def counts_file(tmp_path, body, name="aws_p3.2xlarge_counts.csv"):
    path = tmp_path / name
    path.write_text(COUNTS + body)
    return path


def test_bundled_counts_trace_imports_each_dataset_with_catalog_prices():
    big, small = load_trace("aws-v100-aug-16node"), load_trace("aws-v100-aug-4node")
    assert big.zones == ("us-east-2b", "us-west-2a", "us-west-2c") and big.gap_s == 300
    assert big.n_ticks == 3247  # us-east-2b, the shortest zone of that dataset
    assert small.zones == ("us-east-1f", "us-east-2a", "us-west-2c") and small.n_ticks == 3664
    assert str(big.start) == "2023-08-27 00:00:00"
    stats = {s.zone: s for s in zone_stats(small)}
    assert round(stats["us-west-2c"].availability, 2) == 0.86
    # Catalog prices of p3.2xlarge: the median spot price of the region's zones, on-demand $3.06/h.
    assert stats["us-east-1f"].spot_min_usd_per_h == 0.3941 and stats["us-east-1f"].on_demand_usd_per_h == 3.06
    assert stats["us-west-2c"].spot_max_usd_per_h == 0.5415


def test_counts_need_enough_nodes_and_zones_are_cut_to_the_shortest(tmp_path):
    body = ("d_2023-01-02,0,60,us-east-1a,4,0\nd_2023-01-02,1,60,us-east-1a,4,1\n"
            "d_2023-01-02,2,60,us-east-1a,4,4\nd_2023-01-02,0,60,us-east-2a,4,2\n"
            "d_2023-01-02,1,60,us-east-2a,4,0\n")
    trace = load_trace(counts_file(tmp_path, body))
    assert trace.available.tolist() == [[False, True], [True, False]] and trace.gap_s == 60
    assert str(trace.start) == "2023-01-02 00:00:00"


def test_a_file_with_several_datasets_needs_one_named(tmp_path):
    path = counts_file(tmp_path, "a,0,60,us-east-1a,1,1\na,1,60,us-east-1a,1,0\n"
                                 "b,0,60,us-east-1a,1,0\nb,1,60,us-east-1a,1,0\n")
    with pytest.raises(TraceError, match="has 2 datasets: expected one of a, b") as err:
        load_trace(path)
    assert "#a" in err.value.hint
    assert load_trace(f"{path}#b").available.tolist() == [[False, False]]
    with pytest.raises(TraceError, match="no dataset 'c'"):
        load_trace(f"{path}#c")


def test_counts_without_a_priced_instance_type_are_refused(tmp_path):
    with pytest.raises(TraceError, match="names no instance type"):
        load_trace(counts_file(tmp_path, "a,0,60,us-east-1a,1,1\n", name="counts.csv"))
    with pytest.raises(TraceError, match="No catalog price for p3.2xlarge in region 'mars-1'"):
        load_trace(counts_file(tmp_path, "a,0,60,mars-1a,1,1\n"))
