import numpy as np
import pytest

from capacity.errors import CapacityError
from capacity.usl import fit_usl, read_points, usl_throughput

CONCURRENCY = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128])


@pytest.mark.parametrize("sigma,kappa,lam", [(0.05, 0.001, 1000.0), (0.2, 0.0, 250.0), (0.01, 0.0002, 9e4)])
def test_recovers_known_parameters_from_exact_points(sigma, kappa, lam):
    fit = fit_usl(CONCURRENCY, usl_throughput(CONCURRENCY, sigma, kappa, lam))
    assert fit.sigma == pytest.approx(sigma, rel=1e-4, abs=1e-7)
    assert fit.kappa == pytest.approx(kappa, rel=1e-4, abs=1e-9)
    assert fit.lam == pytest.approx(lam, rel=1e-4)
    assert fit.r_squared > 0.999999


def test_recovers_parameters_from_noisy_points_and_reports_peak():
    rng = np.random.default_rng(7)
    sigma, kappa, lam = 0.03, 0.0005, 12_000.0
    clean = usl_throughput(CONCURRENCY, sigma, kappa, lam)
    noisy = clean * (1 + rng.normal(0, 0.01, clean.shape))
    fit = fit_usl(CONCURRENCY, noisy)
    assert fit.sigma == pytest.approx(sigma, rel=0.15)
    assert fit.kappa == pytest.approx(kappa, rel=0.15)
    assert fit.lam == pytest.approx(lam, rel=0.05)
    n_star = np.sqrt((1 - sigma) / kappa)  # 44.0
    assert fit.peak_concurrency == pytest.approx(n_star, rel=0.1)
    assert fit.max_throughput == pytest.approx(usl_throughput(n_star, sigma, kappa, lam), rel=0.03)
    assert 0 < fit.mape < 0.02


def test_no_coherency_has_no_peak():
    fit = fit_usl(CONCURRENCY, usl_throughput(CONCURRENCY, 0.1, 0.0, 100.0))
    d = fit.to_dict()
    assert d["peak_concurrency"] is None
    assert d["max_throughput"] == pytest.approx(1000.0, rel=1e-3)  # lambda / sigma
    assert d["lambda"] == pytest.approx(100.0, rel=1e-4)


def test_read_points(tmp_path):
    p = tmp_path / "sweep.csv"
    p.write_text("Clients,msgs_per_s,p99_ms\n1,100,1\n2,190,1\n4,350,2\n")
    assert read_points(p) == ([1.0, 2.0, 4.0], [100.0, 190.0, 350.0])
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(CapacityError, match="concurrency,throughput"):
        read_points(bad)
    bad.write_text("concurrency,throughput\n1,x\n")
    with pytest.raises(CapacityError, match=":2:"):
        read_points(bad)


@pytest.mark.parametrize(
    "n,x",
    [([1, 2], [1, 2]), ([1, 2, 3], [1, 2]), ([1, 1, 2], [1, 1, 2]), ([0, 1, 2], [1, 2, 3]),
     ([1, 2, 3], [1, 0, 3])],
)  # fmt: skip
def test_bad_points(n, x):
    with pytest.raises(CapacityError):
        fit_usl(n, x)
