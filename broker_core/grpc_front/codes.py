"""floodgate's answer codes as RocketMQ 5's gRPC status codes."""

from __future__ import annotations

from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.protocol import Code

# a refusal the fuse understands is one a RocketMQ client retries the same way
CODES = {
    Code.OK: pb.OK, Code.SLAVE_NOT_AVAILABLE: pb.OK,
    Code.BAD_REQUEST: pb.BAD_REQUEST, Code.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    Code.MESSAGE_TOO_LARGE: pb.MESSAGE_BODY_TOO_LARGE, Code.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    Code.FLOW_CONTROL: pb.TOO_MANY_REQUESTS, Code.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    Code.NO_PERMISSION: pb.FORBIDDEN, Code.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    Code.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT, Code.NOT_MASTER: pb.HA_NOT_AVAILABLE,
    Code.UNACKNOWLEDGED: pb.HA_NOT_AVAILABLE, Code.DISK_FULL: pb.INTERNAL_SERVER_ERROR,
    Code.SYSTEM_ERROR: pb.INTERNAL_SERVER_ERROR,
    Code.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
    # settling a transaction: no such half; a commit whose consumer lost its queue
    Code.MESSAGE_NOT_FOUND: pb.INVALID_TRANSACTION_ID, Code.FENCED: pb.PRECONDITION_FAILED,
}
