"""The disk of an attempt (pure): gp3 root sized for the data, or the instance-store NVMe for the cache."""

from __future__ import annotations

import pytest

from spotfit.backends.aws import disks
from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.userdata import user_data
from spotfit.backends.base import LaunchOptions
from spotfit.backends.environment import instance_env
from spotfit.errors import UsageError

GIB = disks.GIB


def test_the_root_is_the_image_default_plus_the_data_plus_headroom_in_whole_gib():
    assert disks.root_size_gib(0) == 110
    assert disks.root_size_gib(50 * GIB) == 100 + 60 + 10
    assert disks.root_size_gib(GIB // 3) == 100 + 11  # ceil(0.4 + 10): never smaller than the data needs
    assert disks.root_size_gib(10 * GIB, root_gib=60) == 60 + 12 + 10


@pytest.mark.parametrize(("data_gib", "iops", "mibps"), [(10, 3000, 125), (100, 6000, 500), (2000, 16000, 1000)])
def test_iops_and_throughput_rise_with_the_data_within_gp3_limits(data_gib, iops, mibps):
    plan = disks.disk_plan(data_gib * GIB, "p3.8xlarge")
    [mapping] = plan.block_device_mappings
    assert mapping["DeviceName"] == "/dev/sda1"
    assert mapping["Ebs"] == {"VolumeSize": plan.size_gib, "VolumeType": "gp3", "Iops": iops, "Throughput": mibps,
                              "DeleteOnTermination": True}
    assert (plan.iops, plan.throughput_mibps, plan.nvme_cache) == (iops, mibps, False)
    # gp3: at most 16,000 IOPS, 1,000 MiB/s, 500 IOPS per GiB, and 0.25 MiB/s per IOPS.
    assert iops <= 16000 and mibps <= 1000 and iops <= 500 * plan.size_gib and mibps <= iops / 4


def test_instance_store_families_keep_the_default_root_and_cache_on_nvme():
    for itype in ("g4dn.xlarge", "g5.12xlarge", "g6.xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p5.48xlarge"):
        plan = disks.disk_plan(500 * GIB, itype)
        assert plan.nvme_cache and plan.block_device_mappings == [] and plan.size_gib is None
    assert not disks.has_instance_store("p3.2xlarge") and not disks.has_instance_store("g4ad.xlarge")


def test_an_unknown_size_sends_no_mapping_and_a_too_large_one_is_refused():
    assert disks.disk_plan(None, "p3.2xlarge") == disks.DiskPlan()
    with pytest.raises(UsageError, match=r"data.size_gib.*16384 GiB"):
        disks.disk_plan(14000 * GIB, "p3.2xlarge")


def test_run_instances_carries_the_mapping_with_the_configured_root():
    s = rq.LaunchSettings(region="us-west-2", zone="us-west-2b", instance_type="p3.2xlarge", image_id="ami-1",
                          market="spot", data_bytes=20 * GIB, root_volume_gib=75, root_device="/dev/xvda")
    run = rq.launch_requests(s, "j", 1, "")[-1].params
    assert run["BlockDeviceMappings"][0]["DeviceName"] == "/dev/xvda"
    assert run["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 75 + 24 + 10
    for kw in ({"data_bytes": None}, {"instance_type": "g5.xlarge"}):
        plain = rq.launch_requests(rq.LaunchSettings(**{**s.__dict__, **kw}), "j", 1, "")[-1].params
        assert "BlockDeviceMappings" not in plain


def test_user_data_mounts_the_nvme_and_points_the_cache_there_only_when_asked():
    env = instance_env("s3://b/jobs/j", "ami-1", LaunchOptions())
    with_nvme = user_data("s3://b/jobs/j", 1, env, nvme_cache=True)
    assert f"export SPOTFIT_CACHE_DIR={disks.NVME_MOUNT}/spotfit-cache" in with_nvme
    assert with_nvme.index("SPOTFIT_CACHE_DIR") < with_nvme.index("spotfit.backends.aws.agent")
    assert "SPOTFIT_CACHE_DIR" not in user_data("s3://b/jobs/j", 1, env)


def test_a_job_that_mounts_its_data_installs_rclone_unless_the_image_has_a_mount_tool(aws, job):
    from spotfit.backends.aws.userdata import MOUNT_TOOLS
    from tests.support.aws_moto import aws_backend, launch_request

    backend = aws_backend(aws)
    mounting = backend.plan(launch_request(job, data_mode="mount"), lookup=False)[-1].params["UserData"]
    assert MOUNT_TOOLS in mounting and "apt-get install -y -q rclone fuse3" in mounting
    assert mounting.index("rclone") < mounting.index("spotfit.backends.aws.agent")
    copying = backend.plan(launch_request(job), lookup=False)[-1].params["UserData"]
    assert "rclone" not in copying
