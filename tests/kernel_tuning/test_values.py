import pytest

from kernel_tuning import values
from kernel_tuning.errors import ProfileError, SafetyError
from kernel_tuning.hostfs import HostFS
from kernel_tuning.plan import build_plan

GIB_KB = 1024 * 1024


def test_sizes():
    assert values.parse_size_kb("64M", "t") == 65536
    assert values.parse_size_kb("3G", "t") == 3 * GIB_KB
    assert values.parse_size_kb("8GiB", "t") == 8 * GIB_KB
    assert values.parse_size_kb(1000, "t") == 1000
    with pytest.raises(ProfileError, match="not a size"):
        values.parse_size_kb("lots", "t")


@pytest.mark.parametrize("mem_gib", [4, 8, 16, 64, 256, 1024])
def test_free_memory_targets_scale_with_ram_and_stay_bounded(tmp_path, make_tree, mem_gib):
    make_tree(tmp_path, mem_gib=mem_gib)
    plan = build_plan("broker", tmp_path)
    by_name = {c.setting.name: c.setting for c in plan.checks}
    mem_kb = mem_gib * GIB_KB
    min_free = int(by_name["vm.min_free_kbytes"].target)
    assert 64 * 1024 <= min_free <= 3 * GIB_KB
    assert min_free <= 0.05 * mem_kb
    if mem_gib >= 300:
        assert min_free == 3 * GIB_KB  # the seed's value, reached on very large hosts
    factor = int(by_name["vm.watermark_scale_factor"].target)
    assert 10 <= factor <= 3000
    # the gap the factor opens is close to the extra_free it stands for
    extra = min(max(0.03 * mem_kb, 128 * 1024), 8 * GIB_KB)
    assert abs(factor * mem_kb / 10000 - extra) <= mem_kb / 10000


def test_the_translated_setting_gives_its_reason_in_its_own_terms(tmp_path, make_tree):
    """Rough edge 9: the watermark row read `... becomes vm.watermark_scale_factor on
    kernels without it` beside vm.watermark_scale_factor itself."""
    make_tree(tmp_path, mem_gib=16)
    plan = build_plan("broker", tmp_path)
    setting = {c.setting.name: c.setting for c in plan.checks}["vm.watermark_scale_factor"]
    assert "becomes" not in setting.reason
    assert setting.reason.startswith("the Double-11 talk: wakes kswapd earlier")
    assert "as vm.extra_free_kbytes=" in setting.reason


def test_min_free_above_five_percent_is_refused_unless_forced(tmp_path, make_tree, profile_dir):
    make_tree(tmp_path, mem_gib=4)
    (profile_dir / "greedy.toml").write_text(
        '[sysctl]\n"vm.min_free_kbytes" = { value = 3145728, reason = "seed value" }\n'
    )
    with pytest.raises(SafetyError, match=r"75\.0% of RAM.*--force"):
        build_plan("greedy", tmp_path, [profile_dir])
    plan = build_plan("greedy", tmp_path, [profile_dir], force=True)
    assert plan.checks[0].setting.target == "3145728"


def test_extra_free_kept_where_the_kernel_has_it(tmp_path, make_tree):
    make_tree(tmp_path, mem_gib=512, extra_free=True)
    names = {c.setting.name: c for c in build_plan("broker", tmp_path).checks}
    assert names["vm.extra_free_kbytes"].setting.target == str(8 * GIB_KB)
    assert "vm.watermark_scale_factor" not in names


def test_extra_free_unsupported_when_neither_key_exists(tmp_path, make_tree):
    make_tree(tmp_path, sysctls={"vm.watermark_scale_factor": None})
    names = {c.setting.name: c for c in build_plan("broker", tmp_path).checks}
    assert names["vm.extra_free_kbytes"].status == "unsupported"


def test_scale_factor_bounded_by_what_the_kernel_accepts(tmp_path, make_tree):
    make_tree(tmp_path, sysctls={"kernel.osrelease": "5.4.0"})
    host = HostFS(tmp_path)
    assert values.watermark_scale_max(host) == 1000
    assert values.extra_free_as_scale_factor(GIB_KB, GIB_KB, 1000) == 1000
    assert values.extra_free_as_scale_factor(1, 64 * GIB_KB, 1000) == 10


def test_missing_meminfo_is_a_clear_error(tmp_path):
    from kernel_tuning.errors import HostError

    with pytest.raises(HostError, match="proc/meminfo"):
        build_plan("broker", tmp_path)
