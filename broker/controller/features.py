"""Finalized features (KIP-584, KIP-778): what this software supports, the level a fresh metadata log
starts at, and UpdateFeatures' checks, made as Kafka 3.9's controller makes them.

A feature's finalized level lives in the metadata log as a FeatureLevelRecord; level 0 removes it.
Each update is judged on its own (as in Kafka 3.9): the good ones are written, the bad ones answered
INVALID_UPDATE_VERSION.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import records as r
from .errors import ErrorCode
from .image import MetadataImage

METADATA_VERSION = "metadata.version"

# Feature name -> (min, max) levels this software supports. metadata.version 7 is 3.3-IV3, the oldest
# KRaft level Kafka 4 accepts; 21 is 3.9-IV0, 22 is 4.0-IV0. transaction.version / group.version stay
# unadvertised: clients then use the classic transaction and group protocols, which the coordinators
# implement. share.version (KIP-932): 1 enables share groups, as in Kafka 4.1+. kraft.version stays
# unadvertised too: Kafka 3.9 lists it as 0-1 because it has KIP-853's dynamic voters (level 1:
# AddRaftVoter / RemoveRaftVoter, APIs 80-81), which this quorum lacks, and Kafka lists no feature
# whose highest level is 0 (as it leaves out group.version and transaction.version in 3.9).
SUPPORTED_FEATURES = {METADATA_VERSION: (7, 22), "share.version": (0, 1)}

# What a fresh Kafka 3.9 cluster finalizes: 3.9-IV0.
BOOTSTRAP_METADATA_VERSION = 21

# metadata.version levels whose records differ from the level below (Kafka's "didMetadataChange"):
# a safe downgrade may not cross one of them, since the older level could not read the newer records.
METADATA_CHANGING_LEVELS = frozenset({7, 8, 10, 11, 13, 14, 15, 17, 22})

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int = UPGRADE


def bootstrap_records(image: MetadataImage) -> list:
    """What the first active controller writes to a metadata log that has no metadata.version."""
    if METADATA_VERSION in image.features:
        return []
    return [r.FeatureLevelRecord(name=METADATA_VERSION, feature_level=BOOTSTRAP_METADATA_VERSION)]


def registration_problem(finalized, supported) -> str | None:
    """Why a broker supporting `supported` ({name: (min, max)}) may not join a cluster that has
    `finalized` ({name: level}), or None, as Kafka's controller checks a BrokerRegistration: every
    level (0 for a feature not finalized) within the broker's range. A feature the broker does not
    name counts as 0..0; metadata.version as 1..1, what Kafka assumes of a broker that omits it."""
    for name in sorted(set(finalized) | set(supported)):
        if name == METADATA_VERSION and name not in finalized:
            continue    # a broker of a fresh cluster may register before the level is finalized
        level = finalized.get(name, 0)
        low, high = supported.get(name, (1, 1) if name == METADATA_VERSION else (0, 0))
        if not low <= level <= high:
            return (f"Unable to register because the broker does not support finalized version "
                    f"{level} of {name}. The broker wants a version between {low} and {high}, "
                    f"inclusive.")
    return None


def update_records(image: MetadataImage, updates, node_id: int):
    """(records, {feature: (error code, message or None)}) for UpdateFeatures' `updates`
    (FeatureUpdate); a feature named twice is judged by its last update, as Kafka's map keeps it."""
    records, results = [], {}
    for update in {u.name: u for u in updates}.values():
        problem = _problem(image, update, node_id)
        if problem is None:
            results[update.name] = (0, None)
            records.append(r.FeatureLevelRecord(name=update.name, feature_level=update.level))
        else:
            results[update.name] = (int(ErrorCode.INVALID_UPDATE_VERSION), problem)
    return records, {u.name: results[u.name] for u in updates}


def _problem(image: MetadataImage, update: FeatureUpdate, node_id: int) -> str | None:
    name, level = update.name, update.level
    bad = f"Invalid update version {level} for feature {name}. "
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return bad + "The controller does not support the given upgrade type."
    if level < 0:
        return bad + "A feature version cannot be less than 0."
    supported = SUPPORTED_FEATURES.get(name)
    if supported is None:
        if level != 0:
            return bad + f"Local controller {node_id} does not support this feature."
    elif not supported[0] <= level <= supported[1]:
        return bad + f"Local controller {node_id} only supports versions {supported[0]}-{supported[1]}"
    current = image.features.get(name, 0)
    if level < current and update.upgrade_type == UPGRADE:
        return bad + ("Can't downgrade the version of this feature without setting the upgrade "
                      "type to either safe or unsafe downgrade.")
    if level > current and update.upgrade_type != UPGRADE:
        return bad + "Can't downgrade to a newer version."
    if name == METADATA_VERSION and level < current:
        if any(v in METADATA_CHANGING_LEVELS for v in range(level + 1, current + 1)):
            reason = ("Unsafe metadata downgrade is not supported in this version."
                      if update.upgrade_type == UNSAFE_DOWNGRADE else
                      "Refusing to perform the requested downgrade because it might delete "
                      "metadata information.")
            return f"Invalid metadata.version {level}. {reason}"
    return None
