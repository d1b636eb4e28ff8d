"""Requests from this broker to the other brokers of the cluster (the broker acting as a client).

- `client.BrokerClient(broker)`: `await client.request(node_id, api_key, version, body, timeout=...)`
  sends one Kafka request to a broker named in the metadata image, over the inter-broker listener
  (`inter.broker.listener.name`, else the listener of `security.inter.broker.protocol`), and returns
  the decoded response body; `PeerUnavailable` when it cannot be reached or does not answer in time.
  One connection per destination, reused, requests pipelined on it in order.
- `client.inter_broker_listener_name(config)`, `client.endpoint_of(image, node_id, listener_name)`.
"""
