"""Faults of a run: what fails, where, when; one registry of fault kinds, one module per kind.

    cosim.faults.spec        Fault (a frozen spec), [[faults]] tables and --fault options, checks that
                             need no fabric (times, transport), the element grammar
    cosim.faults.elements    element names, sets and patterns resolved on a fabric and a host map
                             (rank -> host node id) into ResolvedFaults; random processes expanded
    cosim.faults.registry    FaultKind (parameters, checks, scheduling, DAG effect) and register()
    cosim.faults.kinds       one module per kind (link_down, link_flap, link_degrade, switch_down,
                             nic_down, pause_storm, straggler)
    cosim.faults.fault_plan  FaultPlan: the resolved faults of one run, its engine setup and its record
    cosim.faults.mechanisms  faults-table rows no injected fault caused (PFC watchdog, collective timeout)

A run calls :func:`plan` with its faults, fabric, host map, seed and time limit, passes
``FaultPlan.setup`` to the engine, ``FaultPlan.durations_ns`` the DAG's op durations (training), and
records ``FaultPlan.results`` and :func:`mechanism_tables`. Kinds, parameters and units:
docs/models/faults.md.
"""

from cosim.faults import kinds  # noqa: F401  (registers every kind)
from cosim.faults.context import ACTION_CODES, ACTIONS, FaultContext, Row
from cosim.faults.elements import (
                               MAX_FAULTS,
                               Elements,
                               ResolvedFault,
                               elements_of,
                               expand,
                               resolve,
)
from cosim.faults.fault_plan import FaultPlan, faults_config, faults_table, plan
from cosim.faults.mechanisms import (
                               failed_rank,
                               mechanism_tables,
                               timeout_row,
                               watchdog_rows,
                               with_mechanism_rows,
)
from cosim.faults.registry import (
                               ELEMENT_KINDS,
                               KINDS,
                               FaultKind,
                               Param,
                               kind_names,
                               kind_of,
                               register,
)
from cosim.faults.spec import (
                               ELEMENT_SETS,
                               OPTION_SYNTAX,
                               Fault,
                               check_times,
                               check_transport,
                               fault_from_table,
                               fault_to_table,
                               faults_from_list,
                               parse_fault_option,
)

__all__ = ["ACTIONS", "ACTION_CODES", "ELEMENT_KINDS", "ELEMENT_SETS", "KINDS", "MAX_FAULTS", "OPTION_SYNTAX",
           "Elements", "Fault", "FaultContext", "FaultKind", "FaultPlan", "Param", "ResolvedFault", "Row",
           "check_times", "check_transport", "elements_of", "expand", "failed_rank", "fault_from_table",
           "fault_to_table", "faults_config", "faults_from_list", "faults_table", "kind_names", "kind_of",
           "mechanism_tables", "parse_fault_option", "plan", "register", "resolve", "timeout_row",
           "watchdog_rows", "with_mechanism_rows"]
