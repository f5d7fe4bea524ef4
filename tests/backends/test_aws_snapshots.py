"""`data.volume: snapshot` on moto: the first attempt's empty data volume is filled and snapshotted, later
attempts in any zone of the region get their volume from that snapshot, and `spotfit gc` deletes the
snapshots no job uses.

moto (in-process) answers EC2: volumes, snapshots and the attachment of the `RunInstances` mapping; the
instance side (`data_fill.fill_and_snapshot`) runs here against a file:// dataset, its data cache in a
folder standing in for the mounted volume. Fast snapshot restore is a stand-in (moto lacks it).
"""

from __future__ import annotations

import base64
import json
import os
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.backends.aws import data_volume, snapshots
from spotfit.backends.aws.data_fill import fill_and_snapshot
from spotfit.backends.aws.gc import find_leftovers
from spotfit.cli import app
from spotfit.errors import SpecError
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState
from spotfit.stores import open_store
from tests.support.aws_moto import REGION, FastRestores, aws_backend, launch_request


@pytest.fixture
def dataset(tmp_path) -> str:
    url = f"file://{tmp_path}/dataset"
    store = open_store(url)
    store.write_bytes("train/a.bin", b"a" * 3000)
    store.write_bytes("train/b.bin", b"b" * 5000)
    return url


def _launch(aws, job, source, attempt=1, zone="us-west-2b", **options):
    store = open_store(job)  # the fixture's job has attempts 1 and 2; later ones reuse attempt 1's settings
    if not store.exists(f"attempts/{attempt:04d}/runtime.json"):
        store.write_bytes(f"attempts/{attempt:04d}/runtime.json", store.read_bytes("attempts/0001/runtime.json"))
    handle = aws_backend(aws).launch(launch_request(job, attempt=attempt, zone=zone, data_volume="snapshot",
                                                    data_source=source, **options))
    [iid] = handle.instances
    run = aws.calls.of("RunInstances")[-1]
    text = base64.b64decode(aws.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
                            ["UserData"]["Value"]).decode()
    return iid, run, text


def _data_snapshots(aws) -> set[str]:
    """The data snapshots (moto's account also holds the snapshots of its bundled images)."""
    return {s["SnapshotId"] for s in aws.ec2.describe_snapshots(OwnerIds=["self"], Filters=[
        {"Name": "tag-key", "Values": [data_volume.TAG_MANIFEST]}])["Snapshots"]}


def _data_volume(aws, iid) -> dict:
    [vol] = aws.ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [iid]},
                                              {"Name": "attachment.device", "Values": ["/dev/sdf"]}])["Volumes"]
    return vol


def test_the_first_attempt_fills_and_snapshots_later_ones_start_from_the_snapshot_in_any_zone(
        aws, job, dataset, tmp_path):
    iid, run, text = _launch(aws, job, dataset)
    [mapping] = run["BlockDeviceMappings"]  # the root stays the image's; the data volume holds the cache
    assert mapping["DeviceName"] == "/dev/sdf" and "SnapshotId" not in mapping["Ebs"]
    assert mapping["Ebs"]["VolumeType"] == "gp3" and mapping["Ebs"]["DeleteOnTermination"] is True
    assert _data_volume(aws, iid)["AvailabilityZone"] == "us-west-2b"
    assert 'mount "$DEV" "$DATA_DIR"' in text and "-m spotfit.backends.aws.data_fill" in text
    assert text.index("data_fill") < text.index("spotfit.backends.aws.agent")

    # On the instance: fill the volume, snapshot it with the manifest's tag; a second fill makes none.
    report = fill_and_snapshot(dataset, str(tmp_path / "volume-1"), aws.ec2, iid, "job-1")
    assert report["bytes_downloaded"] == 8000 and report["snapshot"].startswith("snap-")
    [snap] = aws.ec2.describe_snapshots(SnapshotIds=[report["snapshot"]])["Snapshots"]
    tags = {t["Key"]: t["Value"] for t in snap["Tags"]}
    assert snap["VolumeId"] == _data_volume(aws, iid)["VolumeId"]
    assert tags[data_volume.TAG_MANIFEST] == report["manifest"] and tags[data_volume.TAG_SOURCE] == dataset
    assert tags["spotfit:managed"] == "true" and tags["spotfit:job"] == "job-1"
    again = fill_and_snapshot(dataset, str(tmp_path / "volume-1b"), aws.ec2, iid, "job-1")
    assert again["snapshot"] is None and "exists" in again["skipped"]

    # The relaunch, in another zone: its volume comes from the snapshot, and nothing is filled.
    iid2, run2, text2 = _launch(aws, job, dataset, attempt=2, zone="us-west-2a")
    [mapping2] = run2["BlockDeviceMappings"]
    assert mapping2["Ebs"]["SnapshotId"] == snap["SnapshotId"]
    vol2 = _data_volume(aws, iid2)
    assert vol2["SnapshotId"] == snap["SnapshotId"] and vol2["AvailabilityZone"] == "us-west-2a"
    assert 'mount "$DEV" "$DATA_DIR"' in text2 and "data_fill" not in text2
    assert not any(c.get("SourceSnapshotIds") for c in aws.calls.of("EnableFastSnapshotRestores"))

    # Changed data has another manifest: the next attempt fills a new volume again.
    open_store(dataset).write_bytes("train/c.bin", b"c" * 10)
    _, run3, text3 = _launch(aws, job, dataset, attempt=3)
    assert "SnapshotId" not in run3["BlockDeviceMappings"][0]["Ebs"] and "data_fill" in text3


def test_only_the_first_worker_snapshots_and_data_changed_during_the_fill_is_not_snapshotted(
        aws, job, dataset, tmp_path, monkeypatch):
    iid, _, _ = _launch(aws, job, dataset)
    other = fill_and_snapshot(dataset, str(tmp_path / "w1"), aws.ec2, iid, "job-1", launch_index=1)
    assert other["snapshot"] is None and other["bytes_downloaded"] == 8000
    from spotfit.stores import datacache

    real_sync = datacache.DataCache.sync

    def sync_then_change(self, source, **kw):
        stats = real_sync(self, source, **kw)
        open_store(source).write_bytes("train/late.bin", b"new")
        return stats

    monkeypatch.setattr(datacache.DataCache, "sync", sync_then_change)
    changed = fill_and_snapshot(dataset, str(tmp_path / "w0"), aws.ec2, iid, "job-1")
    assert changed["snapshot"] is None and "changed" in changed["skipped"]
    assert _data_snapshots(aws) == set()


def test_fast_snapshot_restore_is_enabled_in_the_launch_zone_only_when_asked(aws, job, dataset, tmp_path):
    fast = FastRestores(aws.session)
    iid, _, _ = _launch(aws, job, dataset)
    snap = fill_and_snapshot(dataset, str(tmp_path / "v"), aws.ec2, iid, "job-1")["snapshot"]
    _launch(aws, job, dataset, attempt=2, zone="us-west-2a")
    assert fast.enabled == {}
    _launch(aws, job, dataset, attempt=3, zone="us-west-2c", fast_snapshot_restore=True)
    assert fast.enabled == {snap: {"us-west-2c"}}
    ec2 = aws.session.client("ec2")  # a client made after the stand-in was registered
    assert snapshots.delete_snapshot(ec2, snap) and fast.enabled == {snap: set()}  # disabled, then deleted
    assert _data_snapshots(aws) == set()


def _job(job_id: str, state: JobState, source: str) -> None:
    spec = JobSpec.model_validate({"name": job_id, "script": "train.py", "backend": "aws",
                                   "data": {"source": source, "volume": "snapshot"},
                                   "market": {"zones": [f"{REGION}a"], "trace": None}})
    sdk.db().create_job(job_id, job_id, spec.model_dump_json(), f"file:///tmp/{job_id}", state=state)


def _snapshot(aws, source: str, manifest: str, made_at: float) -> str:
    vol = aws.ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    tags = {"spotfit:managed": "true", data_volume.TAG_MANIFEST: manifest, data_volume.TAG_SOURCE: source,
            snapshots.TAG_MADE_AT: str(made_at)}
    return aws.ec2.create_snapshot(VolumeId=vol, TagSpecifications=[{"ResourceType": "snapshot", "Tags": [
        {"Key": k, "Value": v} for k, v in tags.items()]}])["SnapshotId"]


def test_gc_deletes_the_snapshots_no_active_or_resumable_job_uses(aws, monkeypatch):
    monkeypatch.setattr("spotfit.backends.aws.gc.load_boto3", lambda: SimpleNamespace(Session=lambda: aws.session))
    FastRestores(aws.session)
    _job("live", JobState.RUNNING, "s3://b/live")
    _job("paused", JobState.STOPPED, "s3://b/paused")
    _job("done", JobState.COMPLETED, "s3://b/done")
    old = _snapshot(aws, "s3://b/live", "m-old", 1.0)
    new = _snapshot(aws, "s3://b/live", "m-new", 2.0)  # the data changed: the older one is replaced
    paused = _snapshot(aws, "s3://b/paused", "m-p", 1.0)
    done = _snapshot(aws, "s3://b/done", "m-d", 1.0)
    stranger = _snapshot(aws, "s3://b/nobody", "m-x", 1.0)

    runner = CliRunner()
    listed = runner.invoke(app, ["gc", "--region", REGION, "--dry-run", "--json"])
    assert listed.exit_code == 0, (listed.output, listed.exception)
    found = json.loads(listed.stdout)["regions"][0]["found"]["snapshots"]
    assert found == {old: "s3://b/live", done: "s3://b/done", stranger: "s3://b/nobody"}
    text = runner.invoke(app, ["gc", "--region", REGION, "--dry-run"]).stdout
    assert f"data snapshot {done}  (of s3://b/done" in text
    narrowed = json.loads(runner.invoke(app, ["gc", "--region", REGION, "--job", "done", "--dry-run",
                                              "--json"]).stdout)
    assert narrowed["regions"][0]["found"]["snapshots"] == {}  # snapshots belong to no one job

    assert runner.invoke(app, ["gc", "--region", REGION]).exit_code == 0
    assert _data_snapshots(aws) == {new, paused}
    assert find_leftovers(aws.ec2, keep_sources={"s3://b/live", "s3://b/paused"}).snapshots == {}


def test_snapshot_volumes_are_refused_with_one_line_on_other_backends(job_spec):
    from spotfit.sdk.submit import validate

    spec = job_spec("name: j\nscript: train.py\nbackend: local\ndata: {source: 's3://b/d', volume: snapshot}\n")
    with pytest.raises(SpecError, match=r"^Invalid `data.volume`: received 'snapshot' with backend 'local', "
                                        r"expected 'root'") as err:
        validate(str(spec))
    assert "\n" not in str(err.value)
    aws_spec = job_spec("name: j\nscript: train.py\nbackend: aws\ndata: {source: 's3://b/d', volume: snapshot}\n",
                        name="aws")
    assert validate(str(aws_spec)).data.volume == "snapshot"
    assert validate(str(spec), backend="aws").data.volume == "snapshot"  # `run --backend aws` on a local spec



def test_dry_run_shows_the_data_volume_mapping_and_looks_nothing_up(job_spec, monkeypatch):
    from spotfit.backends.aws.backend import AwsBackend

    for key in [k for k in __import__("os").environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    spec = job_spec("name: dry\nscript: train.py\nbackend: aws\nresources: {accelerator: V100}\n"
                    "market: {trace: null, zones: [us-west-2b]}\naws: {ami: ami-0123456789abcdef0}\n"
                    "data: {source: 's3://bucket/data', size_gib: 200, volume: snapshot}\n")
    doc = AwsBackend().dry_run(str(spec))
    run = next(c["params"] for c in doc["calls"] if c["operation"] == "RunInstances")
    assert run["BlockDeviceMappings"] == [{"DeviceName": "/dev/sdf", "Ebs": {
        "VolumeSize": 250, "VolumeType": "gp3", "Iops": 6000, "Throughput": 500, "DeleteOnTermination": True}}]
    assert doc["disk"].startswith("data volume /dev/sdf: gp3 250 GiB, 6000 IOPS, 500 MiB/s; made from the snapshot")
    assert 'mount "$DEV" "$DATA_DIR"' in run["UserData"] and "data_fill" in run["UserData"]


def test_a_second_job_on_the_same_data_shares_the_snapshot_and_fills_nothing(aws, job, dataset, tmp_path):
    from dataclasses import replace

    iid, _, _ = _launch(aws, job, dataset)
    snap = fill_and_snapshot(dataset, str(tmp_path / "v"), aws.ec2, iid, "job-1")["snapshot"]
    request = launch_request(job, attempt=2, zone="us-west-2a", data_volume="snapshot", data_source=dataset)
    handle = aws_backend(aws).launch(replace(request, job_id="job-2"))
    run = aws.calls.of("RunInstances")[-1]
    assert run["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] == snap
    assert "data_fill" not in base64.b64decode(aws.ec2.describe_instance_attribute(
        InstanceId=handle.instances[0], Attribute="userData")["UserData"]["Value"]).decode()
    assert _data_snapshots(aws) == {snap}


def test_two_jobs_on_the_same_data_download_it_once_and_snapshot_it_once(aws, job, dataset, tmp_path):
    """Counted: job 1 fills (8000 bytes) and snapshots; job 2, in another zone, gets its volume from that
    snapshot, fills nothing, and its runtime's sync on it downloads 0 bytes; a fill of job 2 anyway (its
    launch raced job 1's snapshot) makes no second snapshot. One CreateSnapshot in all."""
    import shutil
    from dataclasses import replace

    from spotfit.stores.datacache import DataCache

    iid, _, _ = _launch(aws, job, dataset)
    first = fill_and_snapshot(dataset, str(tmp_path / "volume-1"), aws.ec2, iid, "job-1")
    assert (first["bytes_downloaded"], len(aws.calls.of("CreateSnapshot"))) == (8000, 1)

    request = launch_request(job, attempt=2, zone="us-west-2a", data_volume="snapshot", data_source=dataset)
    handle = aws_backend(aws).launch(replace(request, job_id="job-2"))
    [iid2] = handle.instances
    assert aws.calls.of("RunInstances")[-1]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] == first["snapshot"]
    assert _data_volume(aws, iid2)["SnapshotId"] == first["snapshot"]
    assert "data_fill" not in base64.b64decode(aws.ec2.describe_instance_attribute(
        InstanceId=iid2, Attribute="userData")["UserData"]["Value"]).decode()

    # Job 2's volume holds what job 1's held (a volume made from its snapshot): one cache entry, no download.
    shutil.copytree(tmp_path / "volume-1", tmp_path / "volume-2", symlinks=True)
    synced = DataCache(tmp_path / "volume-2").sync(dataset, progress=False)
    assert (synced.bytes_downloaded, synced.downloaded, synced.hits) == (0, 0, 2)
    blobs = [p for p in (tmp_path / "volume-2" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 2  # one blob per content, shared by both jobs' views of the source

    raced = fill_and_snapshot(dataset, str(tmp_path / "volume-2"), aws.ec2, iid2, "job-2")
    assert raced["snapshot"] is None and raced["bytes_downloaded"] == 0
    assert len(aws.calls.of("CreateSnapshot")) == 1 and _data_snapshots(aws) == {first["snapshot"]}


def test_gc_keeps_a_snapshot_shared_by_two_sources_while_either_job_may_run(aws, job, tmp_path, monkeypatch):
    """Two sources with identical content share one snapshot, tagged at first with the first source only: the
    second job's launch from it records its source, so gc keeps it while the second job runs after the first
    ended (the dry run says the same), and deletes it once both ended. A job whose launch raced the snapshot's
    making (it filled its own volume) records its source from the instance."""
    from dataclasses import replace

    monkeypatch.setattr("spotfit.backends.aws.gc.load_boto3", lambda: SimpleNamespace(Session=lambda: aws.session))
    FastRestores(aws.session)
    sources = []
    for name in ("first", "second", "third"):  # the same content: same keys, sizes and (file://'s tag) mtimes
        url = f"file://{tmp_path}/{name}"
        for key, size in (("train/a.bin", 3000), ("train/b.bin", 5000)):
            open_store(url).write_bytes(key, key[-5:-4].encode() * size)
            os.utime(tmp_path / name / key, (1_700_000_000, 1_700_000_000))
        sources.append(url)
    first, second, third = sources

    iid, _, _ = _launch(aws, job, first)
    made = fill_and_snapshot(first, str(tmp_path / "volume-1"), aws.ec2, iid, "job-1")
    snap = made["snapshot"]
    request = launch_request(job, attempt=2, zone="us-west-2a", data_volume="snapshot", data_source=second)
    aws_backend(aws).launch(replace(request, job_id="job-2"))
    assert aws.calls.of("RunInstances")[-1]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] == snap
    [described] = aws.ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"]
    assert snapshots.snapshot_sources(described) == [first, second]
    aws_backend(aws).launch(replace(request, job_id="job-2", attempt=1))  # another launch: no second tag
    [again] = aws.ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"]
    assert len(again["Tags"]) == len(described["Tags"])
    # The third job's launch raced the snapshot: its instance fills, finds the snapshot made, records its source.
    raced = fill_and_snapshot(third, str(tmp_path / "volume-3"), aws.ec2, iid, "job-3")
    assert raced["snapshot"] is None and raced["manifest"] == made["manifest"]
    [tagged] = aws.ec2.describe_snapshots(SnapshotIds=[snap])["Snapshots"]
    assert snapshots.snapshot_sources(tagged) == [first, second, third]

    runner = CliRunner()

    def gc(*flags: str) -> dict:
        result = runner.invoke(app, ["gc", "--region", REGION, "--json", *flags])
        assert result.exit_code == 0, (result.output, result.exception)
        return json.loads(result.stdout)["regions"][0]["found"]["snapshots"]

    _job("job-1", JobState.COMPLETED, first)
    _job("job-2", JobState.RUNNING, second)
    _job("job-3", JobState.FAILED, third)
    assert gc("--dry-run") == {} and gc() == {}
    assert _data_snapshots(aws) == {snap}
    sdk.db().move_job("job-2", JobState.STOPPED, "set by the test")  # resumable: still kept
    assert gc() == {} and _data_snapshots(aws) == {snap}
    for state in (JobState.PAUSED, JobState.WAITING, JobState.RUNNING, JobState.COMPLETED):  # resumed, then done
        sdk.db().move_job("job-2", state, "set by the test")
    assert gc("--dry-run") == {snap: f"{first}, {second}, {third}"} and _data_snapshots(aws) == {snap}
    assert gc() == {snap: f"{first}, {second}, {third}"}
    assert _data_snapshots(aws) == set()
