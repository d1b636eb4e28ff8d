"""The consumer protocol's JoinGroup metadata and SyncGroup assignment (int16 version + body).

Decoding reads versions newer than the spec knows with the highest known one, as Kafka's clients do.
"""

from protocol.generated.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.versioned import decode_versioned, encode_versioned

Subscription = ConsumerProtocolSubscription
Assignment = ConsumerProtocolAssignment
TopicPartition = ConsumerProtocolSubscription.TopicPartition


def encode_subscription(subscription, version=None):
    return encode_versioned(subscription, version)


def decode_subscription(data):
    """(version, ConsumerProtocolSubscription)."""
    return decode_versioned(Subscription, data, clamp=True)


def encode_assignment(assignment, version=None):
    return encode_versioned(assignment, version)


def decode_assignment(data):
    """(version, ConsumerProtocolAssignment)."""
    return decode_versioned(Assignment, data, clamp=True)
