"""The timeline as `floodgate trace` prints it: deliveries in time order whatever their
group, a broker's address said once (rough edge 8)."""

from broker_core.trace.timeline import Delivery, Timeline
from console.trace_format import timeline_lines

BORN = 1_794_355_200_000


def timeline(send_broker: str, send_addr: str) -> Timeline:
    t = Timeline("id1", "orders", "order-1", "", "broker-1", 0, 7, BORN, BORN + 1, True, 10,
                 send={"born_ms": BORN, "client": "c1", "broker": send_broker,
                       "addr": send_addr, "status": "SEND_OK", "rt_ms": 1.0})
    t.deliveries = {  # billing pulled later than warehouse: groups sort the other way
        "billing": [Delivery("billing", "b1", BORN + 900, BORN + 950, 900)],
        "warehouse": [Delivery("warehouse", "w1", BORN + 40, None, 40),
                      Delivery("warehouse", "w2", BORN + 2000, None, 2000)],
    }
    return t


def test_deliveries_in_time_order_and_an_address_said_once():
    lines = timeline_lines(timeline("127.0.0.1:10911", "127.0.0.1:10911"))
    delivered = [line for line in lines if "delivered to group" in line]
    assert [line.split("delivered to group ")[1].split()[0] for line in delivered] == [
        "warehouse", "billing", "warehouse"]
    assert "(redelivery)" in delivered[2]
    sent = next(line for line in lines if "sent by" in line)
    assert "to 127.0.0.1:10911: SEND_OK" in sent and sent.count("127.0.0.1:10911") == 1
    named = next(line for line in timeline_lines(timeline("broker-1", "127.0.0.1:10911"))
                 if "sent by" in line)
    assert "to broker-1 (127.0.0.1:10911): SEND_OK" in named
