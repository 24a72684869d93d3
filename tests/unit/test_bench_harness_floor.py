"""bench/harness_floor.py: the versus harness's own loops run over stand-in calls, every message
counted and checked as in a real run, and each floor's ceiling against pyaeron's median."""

import asyncio

import pytest

from tests.unit.test_bench_plots import bench_module


def test_every_loop_counts_every_message_over_the_stand_ins():
    floor = bench_module("harness_floor")
    best = floor.floors(count=3000, rounds=1)
    assert set(best) == set(floor.ROWS)
    assert all(ns > 0 for ns in best.values())


@pytest.mark.parametrize("row", ["subscriber", "one_thread", "handler_only"])
def test_a_message_out_of_order_fails_the_loop(row):
    floor = bench_module("harness_floor")
    numbers = [0, 1, 3, 2, *range(4, 600)]
    calls = floor.StandIns(600, numbers)
    with pytest.raises(bench_module("basics").BenchError, match="600 of 600 messages"):
        asyncio.run(getattr(floor, row)(600, calls))


def test_the_ceiling_is_pyaerons_median_time_over_the_floor():
    floor = bench_module("harness_floor")
    test = floor.VERSUS_ROWS["ipc-1t-a"]
    versus = {"rows": [{"test": test, "pyaeron": {"values": [2e6, 4e6, 5e6]}}]}
    assert floor.pyaeron_ns(versus, "ipc-1t-a") == pytest.approx(250.0)
    assert floor.pyaeron_ns(versus, "ipc-3p-a") is None
