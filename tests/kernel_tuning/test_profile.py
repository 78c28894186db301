import pytest

from kernel_tuning.errors import ProfileError
from kernel_tuning.profile import available_profiles, load_profile, parse_profile_text


def test_builtins_load_with_reasons_and_inheritance():
    assert {"base", "broker", "latency", "throughput"} <= set(available_profiles())
    broker = load_profile("broker")
    sysctl = broker.sections["sysctl"]
    # base comes first, broker's own keys after, in file order
    assert list(sysctl)[:3] == ["fs.file-max", "fs.nr_open", "vm.max_map_count"]
    assert sysctl["vm.swappiness"]["value"] == 1
    assert broker.sections["scheduler"]["data_disk"]["value"] == "deadline"
    assert broker.sections["numa"]["policy"]["value"] == "interleave"
    assert broker.sections["thp"]["enabled"]["value"] == "never"
    for section in broker.sections.values():
        for spec in section.values():
            assert spec["reason"].strip()


def test_variant_overrides_parent_values():
    latency = load_profile("latency")
    assert latency.sections["sysctl"]["vm.dirty_ratio"]["value"] == 10
    assert load_profile("throughput").sections["sysctl"]["vm.dirty_ratio"]["value"] == 40
    assert [p.rsplit("/", 1)[-1] for p in latency.sources] == ["base.toml", "broker.toml", "latency.toml"]


def test_user_profile_overrides_builtin_by_name_and_can_skip(profile_dir):
    (profile_dir / "base.toml").write_text(
        'description = "mine"\n[sysctl]\n"vm.swappiness" = { value = 5, reason = "mine" }\n'
    )
    (profile_dir / "site.toml").write_text(
        'include = "broker"\n[sysctl]\n"vm.dirty_ratio" = { skip = true }\n'
    )
    broker = load_profile("broker", [profile_dir])
    assert "fs.file-max" not in broker.sections["sysctl"]  # the user base replaced the built-in
    assert broker.sections["sysctl"]["vm.swappiness"]["value"] == 1  # broker still overrides base
    site = load_profile("site", [profile_dir])
    assert "vm.dirty_ratio" not in site.sections["sysctl"]
    assert "site" in available_profiles([profile_dir])


def test_unknown_profile_lists_valid_names():
    with pytest.raises(ProfileError, match=r"unknown profile 'nope' \(valid: .*broker"):
        load_profile("nope")


def test_include_cycle_is_refused(profile_dir):
    (profile_dir / "a.toml").write_text('include = "b"\n')
    (profile_dir / "b.toml").write_text('include = ["a"]\n')
    with pytest.raises(ProfileError, match="include cycle: a -> b -> a"):
        load_profile("a", [profile_dir])


@pytest.mark.parametrize(
    "text, message",
    [
        ("[sysctls]\n", "unknown table 'sysctls'"),
        ('[sysctl]\n"vm.x" = { value = 1 }\n', "needs a one-line reason"),
        ('[sysctl]\n"vm.x" = { value = 1, at_least = 2, reason = "r" }\n', "exactly one of"),
        ('[sysctl]\n"vm.x" = { valeu = 1, reason = "r" }\n', "unknown field 'valeu'"),
        ('[sysctl]\n"vm.x" = 1\n', "must be a table"),
        ("include = 3\n", "include must be"),
        ("[sysctl\n", "not valid TOML"),
    ],
)
def test_malformed_profiles_say_what_is_wrong(text, message):
    with pytest.raises(ProfileError, match=message):
        parse_profile_text(text, "t.toml")
