"""Finalized features in a 3-node cluster of `odradek serve` processes: every node answers ApiVersions
with the metadata.version the first active controller finalized; UpdateFeatures sent to a node that
is not the active controller is forwarded to it, and every node then answers the new level; a new
active controller keeps it (and accepts the next update)."""

from protocol import messages as m

from broker.testing_cluster import call, running_cluster

UF = m.UpdateFeaturesRequest


def finalized(cluster, node_id):
    response = call(cluster.nodes[node_id].address, 18, 4, m.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    return {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}


def update(cluster, node_id, feature, level, upgrade_type):
    response = call(cluster.nodes[node_id].address, 57, 1, UF(timeout_ms=10000, feature_updates=[
        UF.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=upgrade_type)]),
        timeout=30)
    assert response.error_code == 0, response
    return [(r.feature, r.error_code) for r in response.results]


def test_update_features_through_any_node_reaches_every_node(tmp_path):
    with running_cluster(tmp_path, nodes=3) as cluster:
        nodes = cluster.brokers
        cluster.wait_until(lambda: all(finalized(cluster, n) == {"metadata.version": (21, 21)}
                                       for n in nodes), 15, "metadata.version finalized everywhere")
        leader = cluster.active_controller()
        follower = next(n for n in nodes if n != leader)
        assert update(cluster, follower, "metadata.version", 20, 2) == [("metadata.version", 0)]
        cluster.wait_until(lambda: all(finalized(cluster, n) == {"metadata.version": (20, 20)}
                                       for n in nodes), 15, "the downgrade everywhere")

        cluster.kill(leader)
        survivors = [n for n in nodes if n != leader]
        cluster.wait_until(lambda: cluster.active_controller() not in (-1, leader), 15,
                           "a new active controller")
        assert update(cluster, survivors[0], "share.version", 1, 1) == [("share.version", 0)]
        cluster.wait_until(lambda: all(
            finalized(cluster, n) == {"metadata.version": (20, 20), "share.version": (1, 1)}
            for n in survivors), 15, "share.version on the survivors, metadata.version kept")
