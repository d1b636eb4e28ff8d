"""Finalized features on the controller: metadata.version finalized on a fresh metadata log (and kept
across restarts and snapshots), and UpdateFeatures judged as Kafka 3.9's controller judges it (the
messages below are Kafka's answers to the same requests)."""

import uuid

import pytest

from broker.controller import Controller, ErrorCode
from broker.controller import records as r
from broker.controller.features import (
    BOOTSTRAP_METADATA_VERSION, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, FeatureUpdate,
    registration_problem, update_records,
)
from broker.controller.image import MetadataImage

MV = "metadata.version"
INVALID = int(ErrorCode.INVALID_UPDATE_VERSION)
AT_21 = MetadataImage().apply([r.FeatureLevelRecord(name=MV, feature_level=21)], 5)


def judge(*updates, image=AT_21):
    return update_records(image, [FeatureUpdate(*u) for u in updates], node_id=1)


@pytest.mark.parametrize("update, message", [
    ((MV, 20, UPGRADE), "Invalid update version 20 for feature metadata.version. Can't downgrade the "
                        "version of this feature without setting the upgrade type to either safe or "
                        "unsafe downgrade."),
    ((MV, 16, SAFE_DOWNGRADE), "Invalid metadata.version 16. Refusing to perform the requested "
                               "downgrade because it might delete metadata information."),
    ((MV, 7, SAFE_DOWNGRADE), "Invalid metadata.version 7. Refusing to perform the requested "
                              "downgrade because it might delete metadata information."),
    ((MV, 16, UNSAFE_DOWNGRADE), "Invalid metadata.version 16. Unsafe metadata downgrade is not "
                                 "supported in this version."),
    ((MV, 99, UPGRADE), "Invalid update version 99 for feature metadata.version. Local controller 1 "
                        "only supports versions 7-22"),
    ((MV, 0, UNSAFE_DOWNGRADE), "Invalid update version 0 for feature metadata.version. Local "
                                "controller 1 only supports versions 7-22"),
    (("foo.bar", 1, UPGRADE), "Invalid update version 1 for feature foo.bar. Local controller 1 does "
                              "not support this feature."),
    (("foo.bar", -1, UNSAFE_DOWNGRADE), "Invalid update version -1 for feature foo.bar. A feature "
                                        "version cannot be less than 0."),
    ((MV, 21, 7), "Invalid update version 21 for feature metadata.version. The controller does not "
                  "support the given upgrade type."),
    ((MV, 21, 0), "Invalid update version 21 for feature metadata.version. The controller does not "
                  "support the given upgrade type."),
    (("share.version", 1, SAFE_DOWNGRADE), "Invalid update version 1 for feature share.version. "
                                           "Can't downgrade to a newer version."),
])
def test_refused_updates_answer_as_kafka(update, message):
    records, results = judge(update)
    assert records == [] and results == {update[0]: (INVALID, message)}


@pytest.mark.parametrize("update", [
    (MV, 21, UPGRADE), (MV, 17, SAFE_DOWNGRADE), (MV, 20, UNSAFE_DOWNGRADE), (MV, 22, UPGRADE),
    ("foo.bar", 0, UPGRADE), ("share.version", 1, UPGRADE),
])
def test_accepted_updates_write_a_feature_level_record(update):
    records, results = judge(update)
    assert results == {update[0]: (0, None)}
    assert records == [r.FeatureLevelRecord(name=update[0], feature_level=update[1])]


def test_each_update_is_judged_on_its_own():
    records, results = judge(("foo.bar", 1, UPGRADE), ("share.version", 1, UPGRADE))
    assert results["foo.bar"][0] == INVALID and results["share.version"] == (0, None)
    assert records == [r.FeatureLevelRecord(name="share.version", feature_level=1)]


def test_a_downgrade_is_judged_from_the_current_level():
    at_17 = AT_21.apply([r.FeatureLevelRecord(name=MV, feature_level=17)])
    assert judge((MV, 16, SAFE_DOWNGRADE), image=at_17)[1][MV][0] == INVALID
    at_22 = AT_21.apply([r.FeatureLevelRecord(name=MV, feature_level=22)])
    assert judge((MV, 21, SAFE_DOWNGRADE), image=at_22)[1][MV][0] == INVALID   # 22 changed records


def test_level_zero_removes_a_finalized_feature():
    on = AT_21.apply([r.FeatureLevelRecord(name="share.version", feature_level=1)])
    assert dict(on.features) == {MV: 21, "share.version": 1}
    off = on.apply([r.FeatureLevelRecord(name="share.version", feature_level=0)])
    assert dict(off.features) == {MV: 21}
    assert r.FeatureLevelRecord(name="share.version", feature_level=0) not in off.to_records()


async def _finalized(controller, feature=MV):
    import trio

    with trio.fail_after(10):
        while feature not in controller.image.features:
            await trio.sleep(0.01)
    return controller.image.features[feature]


async def test_a_fresh_metadata_log_finalizes_metadata_version_and_keeps_changes(tmp_path):
    async with Controller.open(str(tmp_path), snapshot_every=3) as controller:
        assert await _finalized(controller) == BOOTSTRAP_METADATA_VERSION
        results = await controller.update_features([FeatureUpdate(MV, 20, SAFE_DOWNGRADE)],
                                                   validate_only=True)
        assert results == {MV: (0, None)} and controller.image.features[MV] == 21
        results = await controller.update_features([FeatureUpdate(MV, 20, SAFE_DOWNGRADE),
                                                    FeatureUpdate("share.version", 1)])
        assert results == {MV: (0, None), "share.version": (0, None)}
        assert dict(controller.image.features) == {MV: 20, "share.version": 1}
        for _ in range(4):       # past a snapshot: the levels come back from it
            await controller.allocate_producer_ids(1)
    assert list((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))
    async with Controller.open(str(tmp_path), snapshot_every=3) as controller:
        assert await _finalized(controller, "share.version") == 1
        assert dict(controller.image.features) == {MV: 20, "share.version": 1}   # not bootstrapped again


@pytest.mark.parametrize("supported, refusal", [
    ({MV: (7, 22)}, None),
    ({MV: (1, 21), "share.version": (0, 1)}, None),
    ({MV: (1, 20)}, "Unable to register because the broker does not support finalized version 21 of "
                    "metadata.version. The broker wants a version between 1 and 20, inclusive."),
    ({}, "Unable to register because the broker does not support finalized version 21 of "
         "metadata.version. The broker wants a version between 1 and 1, inclusive."),
    ({MV: (7, 22), "foo": (1, 2)}, "Unable to register because the broker does not support "
                                   "finalized version 0 of foo. The broker wants a version between 1 "
                                   "and 2, inclusive."),
])
def test_a_registering_broker_must_support_every_finalized_level(supported, refusal):
    assert registration_problem(AT_21.features, supported) == refusal     # Kafka 3.9's words


def test_a_broker_may_register_before_metadata_version_is_finalized():
    assert registration_problem({}, {MV: (7, 22)}) is None


async def test_broker_registration_refused_for_an_unsupported_level(tmp_path):
    from protocol import messages as m

    from broker.controller import admin

    R = m.BrokerRegistrationRequest

    def registration(broker_id, low, high):
        return R(broker_id=broker_id, cluster_id="cid", incarnation_id=uuid.uuid4(), features=[
            R.Feature(name=MV, min_supported_version=low, max_supported_version=high)])

    async with Controller.open(str(tmp_path), cluster_id="cid") as controller:
        await _finalized(controller)
        refused = await admin.broker_registration(controller, registration(2, 7, 20))
        assert (refused.error_code, refused.broker_epoch) == (ErrorCode.UNSUPPORTED_VERSION, -1)
        assert 2 not in controller.image.brokers
        accepted = await admin.broker_registration(controller, registration(3, 7, 22))
        assert accepted.error_code == 0 and 3 in controller.image.brokers
