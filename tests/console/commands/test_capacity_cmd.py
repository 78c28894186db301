import json

import pytest

from console.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_reliability_json_defaults_are_the_seed(capsys):
    code, out, _ = run(capsys, "capacity", "reliability", "--replicas", "1,2,3", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["replicas"] for r in rows] == [1, 2, 3]
    assert rows[0]["recovery_hours"] == pytest.approx(7500 / 3600)
    assert rows[0]["reliability"] == pytest.approx(0.9927, abs=1e-4)
    code, out, _ = run(capsys, "capacity", "reliability", "--recovery-hours", "2", "--json")
    assert json.loads(out)[1]["reliability"] == pytest.approx(1 - 2.4333e-8, abs=1e-12)


def test_availability_and_forecast(capsys):
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86399", "--mttr-s", "1", "--json")
    assert code == 0 and json.loads(out)["availability"] == pytest.approx(86399 / 86400)
    code, out, _ = run(
        capsys, "capacity", "forecast", "--year", "2016", "--fit-until", "2015", "--json",
        "--peak-to-mean", "4",
    )  # fmt: skip
    f = json.loads(out)
    assert code == 0 and f["low"] <= 1.4e12 <= f["high"]
    assert f["peak_rate"]["mid"] == pytest.approx(f["mid"] * 4 / 86400)


def test_usl_and_size_from_load_test(capsys, tmp_path):
    from capacity.usl import usl_throughput

    points = tmp_path / "sweep.csv"
    rows = [f"{n},{usl_throughput(n, 0.02, 0.0004, 5000.0):.6f}" for n in (1, 2, 4, 8, 16, 32, 64)]
    points.write_text("concurrency,throughput\n" + "\n".join(rows) + "\n")
    code, out, _ = run(capsys, "capacity", "usl", "--points", str(points), "--json")
    fit = json.loads(out)
    assert code == 0
    assert set(fit) >= {"sigma", "kappa", "lambda", "peak_concurrency", "max_throughput"}
    assert fit["sigma"] == pytest.approx(0.02, rel=1e-3)
    code, out, _ = run(
        capsys, "capacity", "size", "--target-rate", "1e6", "--load-test", str(points), "--json"
    )
    plan = json.loads(out)
    assert code == 0 and plan["inputs"]["per_broker_rate"] == pytest.approx(fit["max_throughput"])
    assert plan["brokers"] == max(c["brokers"] for c in plan["constraints"])


def test_bad_input_is_one_line_and_nonzero(capsys, tmp_path):
    code, _, err = run(capsys, "capacity", "reliability", "--replicas", "x")
    assert code == 2 and err.count("\n") == 1
    code, _, err = run(capsys, "capacity", "usl", "--points", str(tmp_path / "none.csv"))
    assert code == 1 and "cannot read" in err and err.count("\n") == 1
    code, _, err = run(capsys, "capacity", "size", "--target-rate", "-5", "--per-broker-rate", "1")
    assert code == 2 and err == "floodgate capacity: error: --target-rate must be > 0, got -5\n"
    with pytest.raises(SystemExit) as exc:
        main(["capacity", "size", "--target-rate", "5"])
    assert exc.value.code == 2


SIZE = ("capacity", "size", "--target-rate", "1e6", "--per-broker-rate", "1e4")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # a negative number in scientific notation is the flag's value, refused for its range
        (("capacity", "size", "--target-rate", "-1e6", "--per-broker-rate", "1e4"),
         "--target-rate must be > 0, got -1e+06"),
        (("capacity", "size", "--target-rate", "-10", "--per-broker-rate", "1e4"),
         "--target-rate must be > 0, got -10"),
        (("capacity", "size", "--target-rate", "inf", "--per-broker-rate", "1e4"),
         "--target-rate must be a finite number, got inf"),
        (("capacity", "size", "--target-rate", "1e6", "--per-broker-rate", "-1E4"),
         "--per-broker-rate must be > 0, got -10000"),
        ((*SIZE, "--utilisation", "1.5"), "--utilisation must be within (0, 1], got 1.5"),
        ((*SIZE, "--fuse-reserve", "1"), "--fuse-reserve must be within [0, 1), got 1"),
        ((*SIZE, "--spares", "-1"), "--spares must be >= 0, got -1"),
        ((*SIZE, "--domains", "0"), "--domains must be >= 1, got 0"),
        ((*SIZE, "--peak-to-mean", "0.5"), "--peak-to-mean must be >= 1, got 0.5"),
        ((*SIZE, "--nic-utilisation", "-.5"), "--nic-utilisation must be within (0, 1], got -0.5"),
        ((*SIZE, "--latency-ms", "0"), "--latency-ms must be > 0, got 0"),
        ((*SIZE, "--client-concurrency", "0"), "--client-concurrency must be >= 1, got 0"),
        (("capacity", "availability", "--mtbf-s", "-inf", "--mttr-s", "1"),
         "--mtbf-s must be a finite number, got -inf"),
        (("capacity", "availability", "--mtbf-s", "10", "--mttr-s", "-1e-3"),
         "--mttr-s must be >= 0, got -0.001"),
        (("capacity", "availability", "--mtbf-s", "10", "--mttr-s", "1", "--target", "0"),
         "--target must be within (0, 1], got 0"),
        (("capacity", "reliability", "--water", "0"), "--water must be within (0, 1], got 0"),
        (("capacity", "reliability", "--masters", "0"), "--masters must be >= 1, got 0"),
        (("capacity", "reliability", "--replicas", "2,0"), "--replicas wants counts >= 1, got 0"),
        (("capacity", "reliability", "--recovery-hours", "-2"),
         "--recovery-hours must be >= 0, got -2"),
        (("capacity", "forecast", "--year", "2027", "--peak-to-mean", "-3"),
         "--peak-to-mean must be >= 1, got -3"),
    ],
)  # fmt: skip
def test_out_of_range_flags_are_usage_errors_naming_the_flag(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err == f"floodgate capacity: error: {message}\n"


def test_in_range_edges_are_accepted(capsys):
    code, out, _ = run(capsys, *SIZE, "--fuse-reserve", "0", "--spares", "0", "--json")
    assert code == 0 and json.loads(out)["inputs"]["fuse_reserve"] == 0


def test_availability_from_a_failover_drill(capsys, tmp_path):
    drill = tmp_path / "drill.json"
    drill.write_text(json.dumps({"group": "group-1", "failover_s": 0.9, "lost": 0}))
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86400",
                       "--from-drill", str(drill), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["mttr_s"] == 0.9 and doc["measured"]["drills"] == 1
    assert doc["availability"] == pytest.approx(86400 / 86400.9)
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86400",
                       "--from-drill", str(drill))
    assert "MTTR measured     0.900 s" in out
    drill.write_text("{}")
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "capacity", "availability", "--mtbf-s", "1", "--mttr-s", "1",
            "--from-drill", str(drill))
    assert exit_.value.code == 2  # one or the other


def test_a_forecast_past_what_the_history_supports_is_bounded_warned_or_refused(capsys):
    # the issue: --year 2027 --peak-to-mean 3.9 printed high 87,722,980,497,286 msgs/s, exit 0
    code, out, err = run(capsys, "capacity", "forecast", "--year", "2027", "--peak-to-mean", "3.9")
    assert code == 0 and "87,722,980,497" not in out
    assert err.count("\n") == 1 and err.startswith("floodgate capacity: warning: 2027 is 11 years")
    assert "stops growing at 2020" in err
    assert "bounded: the history supports 2020 at most" in out
    assert "high 10,800,000,000" in out  # three significant figures, the bound's band
    code, out, err = run(capsys, "capacity", "forecast", "--year", "2027", "--strict")
    assert (code, out) == (1, "") and err.startswith("floodgate capacity: error: 2027 is 11")
    code, out, err = run(capsys, "capacity", "forecast", "--year", "2020", "--strict", "--json")
    doc = json.loads(out)
    assert (code, err, doc["bounded"], doc["supported_until"]) == (0, "", False, 2020)
    code, out, err = run(capsys, "capacity", "forecast", "--year", "2030", "--json")
    assert json.loads(out)["bounded"] is True and "warning" in err  # stdout stays JSON


def test_figures_are_printed_to_the_precision_they_have(capsys):
    code, out, _ = run(capsys, "capacity", "reliability", "--recovery-hours", "2")
    assert code == 0 and "99.27 %" in out and "99.9999976 %" in out
    assert "99.272658" not in out
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86399", "--mttr-s", "1")
    assert "availability      99.9988 %" in out
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86399", "--mttr-s", "1",
                       "--json")
    doc = json.loads(out)
    assert doc["downtime_s_per_period"] == 1.0 and doc["budget_s_per_period"] == 0.864


def test_availability_of_two_modes_side_by_side(capsys, tmp_path):
    ctl, raft = tmp_path / "controller.json", tmp_path / "raft.json"
    ctl.write_text(json.dumps([{"failover_s": s, "lost": 0, "consensus": "controller"}
                               for s in (0.1, 0.12, 0.11)]))
    raft.write_text(json.dumps([{"failover_s": s, "lost": 0, "consensus": "raft"}
                                for s in (0.8, 0.7, 1.1)]))
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "28800",
                       "--from-drill", str(ctl), "--from-drill", str(raft))
    lines = out.splitlines()
    assert code == 0 and lines[1].split()[:2] == ["controller", "0.110"]
    assert lines[2].split()[:2] == ["raft", "0.800"] and lines[2].endswith("MISSES")
    assert lines[-1] == "controller meets 99.999 %; raft does not (0.80 s to recover, 0.29 s allowed)"
    code, out, _ = run(capsys, "capacity", "availability", "--mtbf-s", "86400", "--json",
                       "--from-drill", str(ctl), "--from-drill", str(raft))
    doc = json.loads(out)
    assert [m["target_met"] for m in doc["modes"]] == [True, True]
    assert doc["needs"].startswith("every mode measured meets")
