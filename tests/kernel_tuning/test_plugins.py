from kernel_tuning.hostfs import HostFS
from kernel_tuning.plugins import PLUGINS
from kernel_tuning.plugins.base import Setting, parse_choice
from kernel_tuning.plugins.servicefiles import DROPIN, LIMITS_FILE, parse_limits


def s(plugin, key, target, mode="exact"):
    return Setting(plugin, key, target, "because", mode)


def test_parse_choice_accepts_kernel_and_plain_forms():
    assert parse_choice("none [mq-deadline] kyber\n") == ("mq-deadline", ["none", "mq-deadline", "kyber"])
    assert parse_choice("mq-deadline\n") == ("mq-deadline", None)


def test_sysctl_statuses(tree):
    host = HostFS(tree.root)
    sysctl = PLUGINS["sysctl"]
    assert sysctl.set(host, s("sysctl", "vm.swappiness", "60"), write=False).status == "ok"
    drift = sysctl.set(host, s("sysctl", "vm.swappiness", "1"), write=False)
    assert (drift.status, drift.current, drift.writes[0].data) == ("drift", "60", "1")
    assert tree.sysctl_value("vm.swappiness") == "60\n"  # no-write mode wrote nothing
    missing = sysctl.set(host, s("sysctl", "vm.extra_free_kbytes", "1"), write=False)
    assert missing.status == "unsupported"
    # at_least never lowers a larger value
    assert sysctl.set(host, s("sysctl", "fs.file-max", "1048576", "at_least"), False).status == "ok"
    assert sysctl.set(host, s("sysctl", "vm.max_map_count", "655360", "at_least"), False).status == "drift"
    # multi-value keys compare by fields, whatever the whitespace
    assert sysctl.set(host, s("sysctl", "vm.lowmem_reserve_ratio", "256 256 32 0 0"), False).status == "ok"
    sysctl.set(host, s("sysctl", "vm.swappiness", "1"), write=True)
    assert tree.sysctl_value("vm.swappiness") == "1\n"


def test_deadline_and_mq_deadline_are_the_same_scheduler(tree):
    host = HostFS(tree.root)
    sched = PLUGINS["scheduler"]
    assert sched.set(host, s("scheduler", "vda", "deadline"), False).status == "ok"
    tree.disk("sdb", "[none] mq-deadline")
    check = sched.set(host, s("scheduler", "sdb", "deadline"), write=True)
    assert check.writes[0].data == "mq-deadline"  # the name the kernel offers
    assert tree.read("sys/block/sdb/queue/scheduler") == "mq-deadline\n"
    # a fake tree holds what was written, and that reads back fine
    assert sched.set(host, s("scheduler", "sdb", "deadline"), False).status == "ok"
    tree.disk("old", "noop [cfq] deadline")
    assert sched.set(host, s("scheduler", "old", "mq-deadline"), True).writes[0].data == "deadline"
    tree.disk("nvme0n1", "[none] kyber")
    assert sched.set(host, s("scheduler", "nvme0n1", "deadline"), False).status == "unsupported"


def test_thp_plugin(tree):
    host = HostFS(tree.root)
    thp = PLUGINS["thp"]
    check = thp.set(host, s("thp", "enabled", "never"), write=True)
    assert (check.current, check.status) == ("madvise", "drift")
    assert thp.set(host, s("thp", "enabled", "never"), False).status == "ok"
    assert thp.restore_value("always [madvise] never") == "madvise"


def test_numa_and_limits_share_the_drop_in(tree):
    host = HostFS(tree.root)
    numa, limits = PLUGINS["numa"], PLUGINS["limits"]
    assert numa.set(host, s("numa", "policy", "interleave"), False).current == "default"
    numa.set(host, s("numa", "policy", "interleave"), True)
    limits.set(host, s("limits", "nofile", "655350"), True)
    limits.set(host, s("limits", "memlock", "unlimited"), True)
    dropin = tree.read(DROPIN)
    assert "NUMAPolicy=interleave\n" in dropin
    assert "LimitNOFILE=655350\n" in dropin and "LimitMEMLOCK=infinity\n" in dropin
    assert parse_limits(tree.read(LIMITS_FILE)) == {"nofile": "655350", "memlock": "unlimited"}
    assert numa.set(host, s("numa", "policy", "interleave"), False).status == "ok"
    assert limits.set(host, s("limits", "memlock", "unlimited"), False).status == "ok"


def test_limits_parse_mixed_soft_hard():
    text = "* soft nofile 1024\n* hard nofile 4096\n* - nproc 10 # both\nroot hard nofile 1\n"
    assert parse_limits(text) == {"nofile": "1024/4096", "nproc": "10"}


def test_a_measured_disk_gives_the_schedulers_reason_in_the_measurements_words(tree):
    from pathlib import Path

    from console.measure.backlog import remember
    from kernel_tuning.plan import build_plan
    from kernel_tuning.plugins.scheduler import MEASURED

    measured_file = Path(tree.root) / MEASURED

    def reason_and_note():
        plan = build_plan("broker", tree.root, device="vda")
        [c] = [c for c in plan.checks if c.setting.plugin == "scheduler"]
        return c.setting.reason, " ".join(n for n in plan.notes if "measurement" in n)

    assert reason_and_note()[0].startswith("the RocketMQ design talk")  # nothing measured
    runs = [{"scheduler": "mq-deadline", "send_p99_ms": 4.1, "consume_mb_s": 131.0},
            {"scheduler": "bfq", "send_p99_ms": 9.5, "consume_mb_s": 88.0}]
    remember("vda", {"size": 4096, "runs": runs, "best": "mq-deadline"}, measured_file)
    reason, note = reason_and_note()
    assert "measured on this host" in reason and "4096-byte sync sends" in reason
    assert "mq-deadline p99 4.1 ms, consumers 131 MB/s, bfq p99 9.5 ms" in reason
    assert note == ""  # the profile's deadline is what the measurement favours
    remember("vda", {"size": 4096, "runs": runs, "best": "bfq"}, measured_file)
    assert reason_and_note()[1] == \
        "scheduler.vda: the measurement favours bfq, not the profile's deadline"
    # an unreadable file is no measurement, not a failed plan
    measured_file.write_text("{")
    assert reason_and_note()[0].startswith("the RocketMQ design talk")
