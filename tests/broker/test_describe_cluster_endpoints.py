"""DescribeCluster asking a listener for the other kind of node (KIP-919), as Kafka 3.9 answers on its
controller listener (checked side by side); the broker listener's answers are in test_admin_apis."""

from types import SimpleNamespace

from protocol import ErrorCode, messages

from broker.handlers.cluster import BROKERS_ENDPOINT_TYPE, CONTROLLERS_ENDPOINT_TYPE, refused_endpoint_type


def _asked(version, endpoint_type=1):
    return SimpleNamespace(api_version=version), messages.DescribeClusterRequest(endpoint_type=endpoint_type)


def test_a_controller_listener_refuses_a_request_for_brokers():
    wanted_brokers = ("The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint "
                      "of type BROKER")
    for version, code in ((1, ErrorCode.MISMATCHED_ENDPOINT_TYPE), (0, ErrorCode.INVALID_REQUEST)):
        refused = refused_endpoint_type(*_asked(version), CONTROLLERS_ENDPOINT_TYPE)
        assert (refused.error_code, refused.error_message, refused.cluster_id, refused.controller_id) == \
            (code, wanted_brokers, "", -1)
    unknown = refused_endpoint_type(*_asked(1, 7), CONTROLLERS_ENDPOINT_TYPE)
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                                           "Unsupported endpoint type 7")
    assert refused_endpoint_type(*_asked(1, 2), CONTROLLERS_ENDPOINT_TYPE) is None
    assert refused_endpoint_type(*_asked(0), BROKERS_ENDPOINT_TYPE) is None
