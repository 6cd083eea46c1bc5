"""``nic_down``: a NIC's host link goes down, and up again at the fault's end."""

from cosim.faults.kinds.link_down import LinkDown
from cosim.faults.registry import register


@register
class NicDown(LinkDown):
    name = "nic_down"
    code = 5
    elements = ("host", "rank")
    doc = "The NIC's host link goes down (and up again at its end)"
