"""Client quotas in the metadata image: ClientQuotaRecords set and remove values, an entity with
no values left disappears, and a snapshot (to_records) rebuilds the same quotas."""

from broker.controller import records as r
from broker.controller.client_quotas import QuotaAlteration, alteration_records
from broker.controller.image import MetadataImage


def entity(*pairs):
    return [r.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in pairs]


def test_records_set_remove_and_snapshot():
    image = MetadataImage().apply([
        r.ClientQuotaRecord(entity=entity(("user", "alice"), ("client-id", None)),
                            key="producer_byte_rate", value=1024.0),
        r.ClientQuotaRecord(entity=entity(("ip", None)), key="connection_creation_rate", value=5.0),
        r.ClientQuotaRecord(entity=entity(("client-id", "c")), key="request_percentage", value=1.5),
        r.ClientQuotaRecord(entity=entity(("client-id", "c")), key="request_percentage",
                            remove=True),
    ], offset=3)
    assert dict(image.client_quotas) == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0},
        (("ip", None),): {"connection_creation_rate": 5.0},
    }
    rebuilt = MetadataImage().apply(r.decode_records(r.encode_records(image.to_records())))
    assert rebuilt.client_quotas == image.client_quotas


def test_alterations_write_only_changes():
    current = {(("client-id", "c"),): {"producer_byte_rate": 10.0}}
    unchanged = QuotaAlteration(entity=[("client-id", "c")], ops=[("producer_byte_rate", 10.0, False)])
    assert alteration_records(current, unchanged) == []
    removal = QuotaAlteration(entity=[("client-id", "c")], ops=[("producer_byte_rate", 0.0, True),
                                                                ("consumer_byte_rate", 0.0, True)])
    [record] = alteration_records(current, removal)   # removing what is not there writes nothing
    assert (record.key, record.remove) == ("producer_byte_rate", True)
