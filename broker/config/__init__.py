"""Broker and topic configuration with Kafka's names, types, defaults and validation.

Two catalogs:

- ``BROKER_CONFIGS`` (``broker_catalog``): the server.properties keys this broker understands.
  ``BrokerConfig.load`` reads a properties file plus ``--override`` pairs on top of
  ``EMBEDDED_PROPERTIES`` (our equivalent of Kafka's shipped ``config/server.properties``: a single node
  that is broker and controller, data in ./data) and fails at start-up with ``ConfigError`` on a
  bad value; keys it does not know are kept (``unknown_keys``, DescribeConfigs) and otherwise ignored.
- ``TOPIC_CONFIGS`` (``topic_catalog``): the per-topic keys, each with the broker configs it falls back
  to (Kafka's "synonyms", in precedence order). ``validate_topic_configs`` is the validator CreateTopics /
  AlterConfigs hand to the controller; ``BrokerConfig.topic_defaults()`` resolves every topic key against
  the broker configuration; ``BrokerConfig.describe`` / ``describe_topic`` produce DescribeConfigs
  entries with sources and synonyms.

Values are parsed to Python types (int, float, bool, str, list[str]); ``render`` turns them back into the
strings Kafka puts on the wire.
"""

from .broker_catalog import BROKER_CONFIGS, BROKER_PREFIXES
from .broker_config import EMBEDDED_PROPERTIES, BrokerConfig
from .listeners import Listener, parse_listeners
from .properties import parse_properties
from .topic_catalog import TOPIC_CONFIGS, Synonym, TopicConfigDef, validate_topic_configs
from .values import (INT_MAX, LONG_MAX, ConfigDef, ConfigError, ConfigSource, ConfigType,
                     DescribedConfig, parse_value, render)

__all__ = [
    "BROKER_CONFIGS", "BROKER_PREFIXES", "EMBEDDED_PROPERTIES", "INT_MAX", "LONG_MAX", "TOPIC_CONFIGS",
    "BrokerConfig", "ConfigDef", "ConfigError", "ConfigSource", "ConfigType", "DescribedConfig",
    "Listener", "Synonym", "TopicConfigDef", "parse_listeners", "parse_properties", "parse_value",
    "render", "validate_topic_configs",
]
