"""``switch_down``: every link of a switch goes down, and up again at the fault's end."""

from cosim.faults.kinds.link_down import LinkDown
from cosim.faults.registry import register


@register
class SwitchDown(LinkDown):
    name = "switch_down"
    code = 4
    elements = ("switch",)
    doc = "Every link of the switch goes down (and up again at its end)"
