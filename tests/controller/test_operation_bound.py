"""The controller's per-operation record bound, seen from the broker's handlers on the wire."""

from protocol import ErrorCode
from protocol import messages as m

from broker.testing import running_broker
from tests.broker.raw_client import RawClient

Metadata = m.MetadataRequest


def _metadata(client, names):
    return client.request(3, 12, Metadata(
        topics=[Metadata.MetadataRequestTopic(name=name) for name in names],
        allow_auto_topic_creation=True))


def test_auto_creating_too_many_topics_leaves_them_unknown(tmp_path):
    # 6,000 default topics are 12,000 records: the controller refuses the batch; Metadata answers
    # each UNKNOWN_TOPIC_OR_PARTITION and keeps the connection, and a small request still creates.
    with running_broker(tmp_path) as broker, RawClient("127.0.0.1", broker.port, timeout=30) as client:
        names = [f"auto-{i}" for i in range(6_000)]
        response = _metadata(client, names + names[:10])
        assert [t.name for t in response.topics] == names
        assert {t.error_code for t in response.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        response = _metadata(client, ["auto-1", "auto-1", "auto-2"])   # creates, answers unknown
        assert {t.error_code for t in response.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        response = _metadata(client, ["auto-1", "auto-1", "auto-2"])
        assert [(t.name, t.error_code) for t in response.topics] == [("auto-1", 0), ("auto-2", 0)]
