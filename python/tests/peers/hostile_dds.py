"""A DDS participant that is no ROS 2 node: it publishes, on a ROS 2 topic under
the ROS 2 type name ``sensor_msgs::msg::dds_::Image_``, samples of another
layout (one ``int32``), which no subscriber can decode as an image.

    hostile_dds.py TOPIC COUNT

Built on the PyPI ``cyclonedds`` package alone, on Cyclone's defaults. Prints
``MATCHED`` once a reader matched (within 20 s), ``SENT`` after the samples;
exits when stdin closes.
"""

import sys
import time
from dataclasses import dataclass

from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct, annotations as annotate, types
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
@annotate.final
class NotAnImage(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    value: types.int32


topic_name, count = sys.argv[1], int(sys.argv[2])
participant = DomainParticipant(0)
topic = Topic(participant, "rt" + topic_name, NotAnImage)
qos = Qos(
    Policy.Reliability.Reliable(max_blocking_time=duration(seconds=1)),
    Policy.History.KeepLast(depth=16),
    Policy.DataRepresentation(use_cdrv0_representation=True),
)
writer = DataWriter(participant, topic, qos=qos)
deadline = time.monotonic() + 20
while writer.get_publication_matched_status().current_count < 1 and time.monotonic() < deadline:
    time.sleep(0.05)
print("MATCHED", flush=True)
for k in range(count):
    writer.write(NotAnImage(value=k))
print("SENT", flush=True)
sys.stdin.read()
