"""Pure capacity models for a RocketMQ-style cluster on Double-11.

availability, replica reliability, sizing, the Universal Scalability Law and
the yearly peak forecast. numpy/scipy only; nothing else of floodgate.
"""

from capacity.errors import CapacityError

__all__ = ["CapacityError"]
