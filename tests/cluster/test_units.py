"""Pure pieces of the cluster wiring: quorum settings, cluster ids, NOT_CONTROLLER detection, KIP-853
voter discovery from a DescribeQuorum answer."""

from __future__ import annotations

import pytest

from protocol import ErrorCode, messages as m

from broker.cluster.client import mentions_not_controller
from broker.cluster.discovery import voters_from
from broker.cluster.metadata import derived_cluster_id
from broker.config import BrokerConfig, ConfigError
from broker.config.quorum import parse_voters, standalone_voters


def test_voters_parse_as_kafka_writes_them():
    assert parse_voters(["1@h1:9093", " 2@[::1]:9094", ""]) == {1: ("h1", 9093), 2: ("::1", 9094)}
    for bad in (["1@h1"], ["x@h:1"], ["1@h:0"], ["1h:9093"]):
        with pytest.raises(ConfigError):
            parse_voters(bad)


def test_kafkas_standalone_controller_votes_alone():
    config = BrokerConfig({"process.roles": "broker,controller", "node.id": "3",
                           "controller.quorum.bootstrap.servers": "localhost:9093",
                           "controller.listener.names": "CONTROLLER",
                           "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"})
    assert standalone_voters(config) == {3: ("localhost", 9093)}
    with pytest.raises(ConfigError, match="single server"):
        BrokerConfig({"process.roles": "controller", "node.id": "3",
                      "controller.quorum.bootstrap.servers": "h1:9093,h2:9093",
                      "controller.listener.names": "CONTROLLER",
                      "listeners": "CONTROLLER://:9093"})


def test_a_dedicated_controller_needs_no_client_listener():
    config = BrokerConfig({"process.roles": "controller", "node.id": "1",
                           "controller.quorum.voters": "1@127.0.0.1:9093",
                           "controller.listener.names": "CONTROLLER",
                           "listeners": "CONTROLLER://127.0.0.1:9093"})
    assert config.client_listeners == [] and config.controller_listener.port == 9093
    assert config.multi_node and config.quorum_voters == {1: ("127.0.0.1", 9093)}


def test_nodes_started_alike_derive_one_cluster_id():
    voters = {1: ("h1", 9093), 2: ("h2", 9093)}
    assert derived_cluster_id(voters) == derived_cluster_id(dict(reversed(voters.items())))
    assert derived_cluster_id(voters) != derived_cluster_id({1: ("h1", 9093)})
    assert len(derived_cluster_id(voters)) == 22


def test_not_controller_is_found_at_any_depth():
    R = m.CreateTopicsResponse
    ok = R(topics=[R.CreatableTopicResult(name="a", error_code=0)])
    moved = R(topics=[R.CreatableTopicResult(name="a", error_code=0),
                      R.CreatableTopicResult(name="b", error_code=ErrorCode.NOT_CONTROLLER)])
    assert not mentions_not_controller(ok) and mentions_not_controller(moved)
    assert mentions_not_controller(m.BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER))


def test_voters_come_from_the_leaders_describe_quorum_nodes():
    R = m.DescribeQuorumResponse
    part = R.PartitionData(partition_index=0, leader_id=2, leader_epoch=3, high_watermark=9,
                           current_voters=[R.ReplicaState(replica_id=v, log_end_offset=9)
                                           for v in (1, 2)], observers=[])
    nodes = [R.Node(node_id=v, listeners=[R.Listener(name="CONTROLLER", host=f"h{v}", port=9093),
                                          R.Listener(name="OTHER", host="x", port=1)])
             for v in (1, 2)]
    answer = R(topics=[R.TopicData(topic_name="__cluster_metadata", partitions=[part])],
               nodes=nodes)
    assert voters_from(answer, "CONTROLLER") == {1: ("h1", 9093), 2: ("h2", 9093)}
    part.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER           # a follower's answer: ask on
    assert voters_from(answer, "CONTROLLER") is None
    part.error_code = 0
    answer.nodes = nodes[:1]                                      # a voter without its address
    assert voters_from(answer, "CONTROLLER") is None
