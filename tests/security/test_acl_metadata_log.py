"""ACLs in the metadata log: committed through the controller, restored from snapshots and the
log after a restart, and applied to the authorizer by image listeners."""

from broker.controller import Controller
from broker.security.acls import (
    AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType as Perm,
    PatternType as PT, ResourceType as RT,
)
from broker.security.authorizer import StandardAuthorizer
from broker.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")


def binding(name, op=Op.READ, pattern=PT.LITERAL):
    return AclBinding(RT.TOPIC, name, pattern, "User:alice", "*", op, Perm.ALLOW)


async def test_acls_survive_snapshots_and_restarts_and_reach_listeners(tmp_path):
    authorizer = StandardAuthorizer()
    async with Controller.open(str(tmp_path), snapshot_every=3) as controller:
        controller.add_listener(authorizer.on_image_change)
        for k in range(5):
            [result] = await controller.create_acls([binding(f"t{k}")])
            assert result.error_code == 0
        assert authorizer.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t4")
        [deleted] = await controller.delete_acls([AclBindingFilter(RT.TOPIC, "t1", PT.LITERAL)])
        assert deleted.deleted == [binding("t1")]
        assert not authorizer.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t1")
        await controller.create_acls([binding("team.", Op.WRITE, PT.PREFIXED)])
        before = dict(controller.image.acls)
    assert list((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))
    async with Controller.open(str(tmp_path), snapshot_every=3) as controller:
        assert dict(controller.image.acls) == before
        restarted = StandardAuthorizer()
        restarted.load(controller.image.acls)
        assert restarted.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "team.orders")
        assert restarted.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t0")
        assert not restarted.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t1")
